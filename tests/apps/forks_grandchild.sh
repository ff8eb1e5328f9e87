#!/bin/sh
# Leaves a grandchild behind (a subshell's `sleep 1000`), prints `grandchild=PID`, then serves.
( sleep 1000 3<&- & echo "grandchild=$!"; wait ) &
exec "${PYTHON:-python3}" "$(dirname "$0")/python_app.py" forker
