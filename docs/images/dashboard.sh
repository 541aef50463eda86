#!/usr/bin/env bash
# Rebuilds docs/images/dashboard.png: the bundled example's dashboard, as the README shows it.
# Needs judgekit with the embedded judge (the README's set-up) and Debian's chromium.
# Run from the repository root: bash docs/images/dashboard.sh
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r examples rubrics calibration "$work"/
(cd "$work" && python -m judgekit run examples/email-update --html dashboard.html >/dev/null)
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1280 \
    --screenshot="$PWD/docs/images/dashboard.png" "file://$work/dashboard.html"
