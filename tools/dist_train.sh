#!/usr/bin/env bash
# Usage: tools/dist_train.sh CONFIG NUM_PROCS [train.py options]
exec "$(dirname "$0")/dist_launch.sh" train.py "$2" "$1" --launcher pytorch "${@:3}"
