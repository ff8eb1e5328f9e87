#!/bin/sh
# Holds the socket rein passed (connections queue in its backlog) but never answers one.
exec sleep 1000
