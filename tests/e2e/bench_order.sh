#!/usr/bin/env bash
# scripts/bench.sh's run order and warm-up size, taken out of the script and checked on their own
# (make bench is not part of make check). The order: over n repetitions (2n for odd n) every
# variant runs once in each position and right after each other variant equally often, so that
# what one run leaves behind does not always fall on the same successor (the rotation it replaced
# kept live_10m's ideal table behind heaptrack every time). The warm-up: four times the largest
# resident set seen so far, within [256 MiB, the cap].
. "$(dirname "$0")/lib.sh"
BENCH=$OT_ROOT/scripts/bench.sh
D=$(newdir bench_order)
sed -n '/^run_order() {/,/^}/p; /^warm_mib() {/,/^}/p' "$BENCH" >"$D/funcs.sh"
if ! grep -q '^run_order()' "$D/funcs.sh" || ! grep -q '^warm_mib()' "$D/funcs.sh"; then
    fail bench_order_found "run_order or warm_mib not found in scripts/bench.sh"
    exit 0
fi
pass bench_order_found

# Every row of n = 2..8, as "n i0 i1 ...".
bash -c '. "$1"; for n in 2 3 4 5 6 7 8; do rows=$((n % 2 ? 2 * n : n)); for ((r = 0; r < rows; r++)); do echo "$n $(run_order $n $r)"; done; done' \
    _ "$D/funcs.sh" >"$D/rows.txt"
balanced() { # file -> status 0 if every n's rows are permutations, each position and each ordered
             # adjacent pair covered equally often; prints the first problem otherwise
    awk 'function bad_(m) { if (!bad) print m; bad = 1 }

    { n = $1; rows[n]++
      delete seen
      for (k = 2; k <= NF; k++) { v = $k; if (v < 0 || v >= n || (v in seen)) bad_("n=" n " row " rows[n] " not a permutation: " $0)
                                  seen[v] = 1; pos[n, v, k - 2]++
                                  if (k > 2) pair[n, $(k - 1), v]++ }
      if (NF - 1 != n) bad_("n=" n " row of " NF - 1 " entries") }
    END {
      for (n = 2; n <= 8; n++) {
        want = n % 2 ? 2 : 1
        if (rows[n] != want * n) bad_("n=" n ": " rows[n] " rows")
        for (a = 0; a < n; a++) for (k = 0; k < n; k++)
          if (pos[n, a, k] != want) bad_("n=" n ": variant " a " at position " k " " pos[n, a, k] + 0 " times")
        for (a = 0; a < n; a++) for (b = 0; b < n; b++)
          if (a != b && pair[n, a, b] != want) bad_("n=" n ": " b " after " a " " pair[n, a, b] + 0 " times")
      }
      exit bad }' "$1"
}
if balanced "$D/rows.txt" >"$D/rows.out"; then pass bench_order_balanced; else fail bench_order_balanced "$(cat "$D/rows.out")"; fi

# The check above fails on a plain rotation (each variant always behind the same one).
bash -c 'for n in 2 3 4 5 6 7 8; do rows=$((n % 2 ? 2 * n : n)); for ((r = 0; r < rows; r++)); do
             printf "%s" "$n"; for ((i = 0; i < n; i++)); do printf " %s" $(((i + r) % n)); done; echo; done; done' >"$D/rotation.txt"
if balanced "$D/rotation.txt" >"$D/rotation.out"; then
    fail bench_order_rotation_rejected "the balance check passed a plain rotation"
elif grep -q " after " "$D/rotation.out"; then
    pass bench_order_rotation_rejected
else
    fail bench_order_rotation_rejected "rejected for another reason: $(head -n 1 "$D/rotation.out")"
fi

# Repetitions past the square start it again.
check bench_order_wraps bash -c '. "$1"; [ "$(run_order 4 4)" = "$(run_order 4 0)" ] && [ "$(run_order 5 10)" = "$(run_order 5 0)" ]' \
    _ "$D/funcs.sh"

warm() { # RSS_SEEN_KIB(or -) CAP_MIB -> warm_mib for workload w
    bash -c 'declare -A RSS_SEEN; [ "$1" != - ] && RSS_SEEN[w]=$1; WARM_CAP=$2; . "$3"; warm_mib w' _ "$1" "$2" "$D/funcs.sh"
}
check bench_warm_first_run bash -c '[ "$1" = 1024 ]' _ "$(warm - 100000)"
check bench_warm_four_times bash -c '[ "$1" = 2000 ]' _ "$(warm 512000 100000)"
check bench_warm_floor bash -c '[ "$1" = 256 ]' _ "$(warm 1000 100000)"
check bench_warm_cap bash -c '[ "$1" = 700 ]' _ "$(warm 512000 700)"
