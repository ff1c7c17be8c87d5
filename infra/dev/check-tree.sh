#!/usr/bin/env bash
# Keeps the repository a source tree: fails on a tracked file over 1 MB, on
# a tracked executable binary (ELF, Mach-O, PE) and on a Go module whose
# go.mod or go.sum `go mod tidy` would change. `make test` runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=$((1024 * 1024))
fail=0

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	list() { git ls-files -z; }
else
	list() { find . -path ./.git -prune -o -path ./bin -prune -o -path ./.data -prune -o -type f -print0; }
fi

while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	size=$(stat -c %s "$f")
	if ((size > limit)); then
		echo "check-tree: $f is $size bytes; tracked files must stay under 1 MB"
		fail=1
	fi
	magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
	case "$magic" in
	7f454c46 | cffaedfe | cefaedfe | feedface | feedfacf | cafebabe | 4d5a*)
		echo "check-tree: $f is an executable binary; build it into bin/ instead of committing it"
		fail=1
		;;
	esac
done < <(list)

for mod in contracts events infra services; do
	if ! out=$(cd "$mod" && go mod tidy -diff 2>&1); then
		echo "check-tree: module $mod is not tidy; run (cd $mod && go mod tidy):"
		echo "$out"
		fail=1
	fi
done

exit "$fail"
