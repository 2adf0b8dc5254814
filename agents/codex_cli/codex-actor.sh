#!/bin/sh
# Start Codex CLI as a confined mailbox actor: write its configuration, then exec it.
#
# Codex reads its provider only from $CODEX_HOME/config.toml, so this script writes one
# at each start from the environment, then execs the CLI with its own arguments ("$@",
# e.g. `exec --json ... -`). It uses only /usr/bin tools.
#
#   CODEX_HOME       Codex's own state (config, sqlite files, shell snapshots); default
#                    /tmp/codex-home, the sandbox's private /tmp, never HOME.
#   OPENAI_BASE_URL  the Responses API base, ending in /v1; default
#                    https://api.openai.com/v1.
#   OPENAI_API_KEY   the key, read by Codex itself (env_key), never written to a file.
#
# The provider is a custom `model_providers` table (HTTP streaming, no WebSocket, no
# ChatGPT sign-in); plugins, analytics, feedback, update checks, the provider's web
# search tool and the history file are off, so the provider is the only host contacted.
set -eu

CODEX_HOME=${CODEX_HOME:-/tmp/codex-home}
base_url=${OPENAI_BASE_URL:-https://api.openai.com/v1}
export CODEX_HOME

fail() {
	printf 'codex-actor: %s\n' "$*" >&2
	exit 2
}

# A value goes into a TOML basic string: refuse what would need escaping.
case $base_url in
*[\"\\]* | *"
"*) fail "OPENAI_BASE_URL holds a quote, a backslash or a newline" ;;
esac
case $base_url in
http://* | https://*) ;;
*) fail "OPENAI_BASE_URL must start with http:// or https://" ;;
esac

umask 077
mkdir -p "$CODEX_HOME"
cat >"$CODEX_HOME/config.toml" <<EOF
model_provider = "actor"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.actor]
name = "actor"
base_url = "$base_url"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false
requires_openai_auth = false

[features]
plugins = false

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"
EOF

# The native binary itself when it is found beside the npm launcher: the launcher finds
# it only under a folder named node_modules, and would keep a Node process alive.
launcher=$(command -v codex) || fail "codex is not on PATH"
packages=$(dirname "$(dirname "$(dirname "$(readlink -f "$launcher")")")")
case $(uname -m) in
x86_64) native=$packages/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex ;;
aarch64 | arm64) native=$packages/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex ;;
*) native= ;;
esac
if [ -n "$native" ] && [ -x "$native" ]; then
	exec "$native" "$@"
fi
exec "$launcher" "$@"
