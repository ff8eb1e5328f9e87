"""bench/run-all's scenarios and the pieces they share (see bench/run-all and bench/README.md)."""
