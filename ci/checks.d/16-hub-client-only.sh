#!/usr/bin/env bash
# The stage library builds the hub client alone (issue 21 item 1): `pipeline` depends on `hub`
# without its `server` feature, so neither the file-backed server nor axum is in its dependency
# tree, and the client compiles without the server (`hub --no-default-features`).
set -euo pipefail
cd "$(dirname "$0")/../.."
tree=$(cargo tree -p pipeline -e normal --prefix none --locked)
if grep -qE '^axum v' <<< "$tree"; then
    echo "pipeline's dependency tree has axum (the hub server): depend on hub without \`server\`" >&2
    exit 1
fi
cargo check -p hub --no-default-features --lib --locked --quiet
echo "hub client only: pipeline's tree has no axum; hub builds without the server"
