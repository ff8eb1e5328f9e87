#!/bin/sh
# Becomes ready, then exits 1 0.2 s later — as long as the file $CRASH_FLAG exists.
exec "${PYTHON:-python3}" "$(dirname "$0")/python_app.py" crash --crash-if "$CRASH_FLAG"
