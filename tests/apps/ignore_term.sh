#!/bin/sh
# Serves like python_app.py, but ignores SIGTERM (the ignored disposition survives exec).
trap '' TERM
exec "${PYTHON:-python3}" "$(dirname "$0")/python_app.py" stubborn
