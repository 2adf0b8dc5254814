#!/bin/sh
# Test actor in POSIX shell (argv: ENDPOINT): two small chunks, then stop.
# Only programs under /usr: it runs inside the sandbox.
endpoint="$1"
n=1
while :; do
    obs="$endpoint/outbox/obs-$n.json"
    while [ ! -f "$obs" ]; do
        [ -f "$endpoint/outbox/closed.json" ] && exit 0
        sleep 0.05
    done
    id=$(sed -n 's/.*"request_id": *"\([0-9a-f]*\)".*/\1/p' "$obs" | head -n 1)
    if [ "$n" -le 2 ]; then
        body='"decision": "act", "actions": [[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, -1.0]]'
    else
        body='"decision": "stop"'
    fi
    printf '{"schema": "mailroom.response/v1", "request_id": "%s", %s}' "$id" "$body" \
        > "$endpoint/inbox/.resp-$n.json.tmp"
    mv "$endpoint/inbox/.resp-$n.json.tmp" "$endpoint/inbox/resp-$n.json"
    echo "answered $n"
    n=$((n + 1))
done
