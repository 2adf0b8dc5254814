#!/bin/sh
# Start Gemini CLI as a confined mailbox actor: write its settings, then exec it.
#
# Gemini CLI reads its settings from $GEMINI_CLI_HOME/.gemini/settings.json, so this
# script writes them at each start, then execs the CLI with its own arguments ("$@").
# It uses only /usr/bin tools.
#
#   GEMINI_CLI_HOME         Gemini CLI's own state (settings, history, its temporary
#                           files); default /tmp/gemini-home, the sandbox's private /tmp.
#   GEMINI_API_KEY          the key, read by the CLI itself, never written to a file.
#   GOOGLE_GEMINI_BASE_URL  the Gemini API's address (the provider gateway's, inside).
#
# The settings choose the API key's authentication (the CLI refuses a base URL given
# by the environment alone), turn usage statistics (Google's Clearcut logging),
# telemetry, update checks and the IDE integration off, and leave out the provider's
# web search and the web fetch tool (which would fetch a page from the sandbox itself),
# so the model provider, through its base URL, is the only host contacted.
set -eu

GEMINI_CLI_HOME=${GEMINI_CLI_HOME:-/tmp/gemini-home}
export GEMINI_CLI_HOME

umask 077
mkdir -p "$GEMINI_CLI_HOME/.gemini"
cat >"$GEMINI_CLI_HOME/.gemini/settings.json" <<'SETTINGS'
{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "ide": {"enabled": false},
  "tools": {"exclude": ["google_web_search", "web_fetch"]}
}
SETTINGS

exec gemini "$@"
