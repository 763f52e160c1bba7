#!/usr/bin/env bash
# simdiff.sh runs a fixed set of `corral sim` commands with --json and
# compares their figures with a saved reference, to the digit. It guards
# refactors of the engine that must not change a scheduling decision.
#
#   hack/simdiff.sh ref   [DIR]   build corral, run every case, save DIR/*.json
#   hack/simdiff.sh check [DIR]   build corral, run every case, diff against DIR
#
# DIR defaults to $TMPDIR/corral-simdiff (the reference is a local artefact of
# the code it came from, not a committed file). Timing keys (wall_seconds,
# cycle_mean_us, cycle_max_us, decision_mean_us) measure the machine, not the
# decisions, and are left out of the comparison. Each case takes under a
# minute on 2 cores; CASES=name,name runs a subset.
set -euo pipefail -f # -f: the trace URLs hold ? and &, no globbing

mode=${1:-check}
dir=${2:-${TMPDIR:-/tmp}/corral-simdiff}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$dir/corral

# name|arguments (each case is one line; names are file names).
cases=(
	"default|--seeds 42 --policies corral,spread,fifo,greedy"
	"openb-fgd|--cluster openb --trace openb:default --protocol fgd --seeds 42-43 --policies corral,binpack"
	"openb-replay|--cluster openb --trace openb:default --seeds 42 --policies corral"
	"queues|--cluster dgx-h100:blocks=1,racks=4,nodes=8 --trace gen:llm?jobs=600&late=0.5&load=1.1&ckpt=30m&restart=5m --queues teams --policies corral,corral-newest,corral-consolidate --seeds 42-43"
	"failures|--cluster dgx-h100:blocks=2,racks=5,nodes=16 --trace gen:llm?jobs=600 --seeds 42 --policies corral --failures llama3,scale=30,overhead=10m,replace-overhead=3m --spares rack=8"
	"failures-restart|--cluster dgx-h100:blocks=2,racks=5,nodes=16 --trace gen:llm?jobs=600 --seeds 42 --policies corral --failures llama3,scale=30,overhead=10m --remediation RestartGang"
	"mig|--cluster mig:layout=mixed --trace gen:mig?jobs=2000&load=0.9 --seeds 42 --policies corral,binpack"
)

case $mode in
ref | check) ;;
*)
	echo "usage: $0 ref|check [DIR]" >&2
	exit 2
	;;
esac

mkdir -p "$dir/ref" "$dir/new"
(cd "$root" && go build -o "$bin" ./cmd/corral)
out=$dir/new
[ "$mode" = ref ] && out=$dir/ref

strip='del(.. | objects | (.wall_seconds, .cycle_mean_us, .cycle_max_us, .decision_mean_us))'
fail=0
for c in "${cases[@]}"; do
	name=${c%%|*}
	args=${c#*|}
	if [ -n "${CASES:-}" ] && [[ ",$CASES," != *",$name,"* ]]; then
		continue
	fi
	start=$(date +%s)
	# shellcheck disable=SC2086 # the arguments are split on purpose
	"$bin" sim $args --json "$out/$name.raw.json" >/dev/null
	jq -S "$strip" "$out/$name.raw.json" >"$out/$name.json"
	took=$(($(date +%s) - start))
	if [ "$mode" = ref ]; then
		echo "ref   $name (${took}s)"
		continue
	fi
	if diff -u "$dir/ref/$name.json" "$out/$name.json" >"$out/$name.diff"; then
		echo "same  $name (${took}s)"
	else
		echo "DIFF  $name (${took}s): $out/$name.diff"
		head -40 "$out/$name.diff"
		fail=1
	fi
done
exit $fail
