#!/bin/sh
# A stand-in sensor adapter for the seed's contract:
#   sense.sh --route R --state S --appearance A --fixture F --out DIR
# It records its arguments (tribunal passes the route exactly as the spec wrote it), then
# writes DIR/render.png (the approved reference, as a simulator would render it) and
# DIR/probe.json.
set -eu
log="${TMPDIR:-/tmp}/tribunal-app-sense.log"
printf 'sense.sh' >> "$log"
for a in "$@"; do printf ' %s' "$a" >> "$log"; done
printf '\n' >> "$log"
while [ $# -gt 0 ]; do
  case "$1" in
    --route) route=$2; shift 2;;
    --state) state=$2; shift 2;;
    --appearance) appearance=$2; shift 2;;
    --fixture) fixture=$2; shift 2;;
    --out) out=$2; shift 2;;
    *) echo "sense.sh: unknown flag $1" >&2; exit 2;;
  esac
done
case "$route" in
  app://tasks/list) ;;
  *) echo "sense.sh: no screen at route $route" >&2; exit 1;;
esac
cp "$(dirname "$0")/references/list-populated-light.png" "$out/render.png"
printf '{"route":"%s","state":"%s","appearance":"%s","fixture":"%s","tree":[{"id":"screen.list","role":"main","name":"Tasks"},{"id":"button.createItem","role":"button","name":"New task"}]}\n' \
  "$route" "$state" "$appearance" "$fixture" > "$out/probe.json"
