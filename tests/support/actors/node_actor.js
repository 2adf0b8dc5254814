// Test actor in Node.js (argv: ENDPOINT): two small chunks, then stop.
// Node's standard library only: it runs inside the sandbox.
"use strict";
const fs = require("fs");
const path = require("path");

const endpoint = process.argv[2];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  for (let n = 1; ; n += 1) {
    const obsFile = path.join(endpoint, "outbox", `obs-${n}.json`);
    while (!fs.existsSync(obsFile)) {
      if (fs.existsSync(path.join(endpoint, "outbox", "closed.json"))) return;
      await sleep(50);
    }
    const obs = JSON.parse(fs.readFileSync(obsFile, "utf8"));
    const response = { schema: "mailroom.response/v1", request_id: obs.request_id };
    if (n <= 2) {
      response.decision = "act";
      response.actions = [[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, -1.0]];
    } else {
      response.decision = "stop";
    }
    const final = path.join(endpoint, obs.response_file);
    const tmp = path.join(path.dirname(final), `.${path.basename(final)}.tmp`);
    fs.writeFileSync(tmp, JSON.stringify(response));
    fs.renameSync(tmp, final);
    console.log(`answered ${n}`);
  }
}

main();
