# Shell helpers of the process-level tests that start daemons (sourced, not run): the scripts
# append each daemon's pid to `pids` and define `fail`.

pids=()

# Stops every daemon in `pids` and waits for them (from the scripts' EXIT traps).
stop_daemons() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
}

# Waits (bounded: $3 tenths of a second, default 100) for a line matching $2 in file $1 and
# prints it; fails naming the file and its last lines otherwise.
wait_line() {
  for _ in $(seq 1 "${3:-100}"); do
    if grep -q "$2" "$1" 2> /dev/null; then
      grep -m1 "$2" "$1"
      return 0
    fi
    sleep 0.1
  done
  fail "no '$2' in $1: $(tail -5 "$1" 2> /dev/null)"
}
