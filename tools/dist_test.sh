#!/usr/bin/env bash
# Usage: tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCS [test.py options]
exec "$(dirname "$0")/dist_launch.sh" test.py "$3" "$1" "$2" --launcher pytorch "${@:4}"
