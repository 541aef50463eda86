#!/usr/bin/env bash
# Rebuilds docs/images/dashboard.png, the README's picture: the bundled example's dashboard after
# the second run of the CI loop (recorded in a history, compared with the first, green run).
# Needs judgekit with the embedded judge (the README's set-up) and Debian's chromium.
# Run from the repository root: bash docs/images/dashboard.sh
set -euo pipefail
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r examples rubrics calibration "$work"/
cd "$work"
python -m judgekit run examples/email-update --history history.sqlite --compare >/dev/null
python -m judgekit run examples/email-update --history history.sqlite --compare --html dashboard.html >/dev/null
chromium --headless --no-sandbox --disable-gpu --disable-background-networking --hide-scrollbars --window-size=1280,1280 \
    --screenshot="$root/docs/images/dashboard.png" "file://$work/dashboard.html" 2>/dev/null
