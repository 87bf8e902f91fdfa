# Sourced by the command-line test scripts (tests/cli, tests/net), which are
# called as SCRIPT CASE BIN_DIR SOURCE_DIR [ARG]: sets case_name, bin, src and
# arg, a scratch folder $tmp removed at exit, and the helpers below.
set -euo pipefail
case_name=$1
bin=$2
src=$3
arg=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_status WANT CMD... : runs CMD (stdout to $tmp/out, stderr to
# $tmp/err) and checks its exit status; on a mismatch shows both.
expect_status() {
  local want=$1
  shift
  local got=0
  "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
  [ "$got" -eq "$want" ] || { cat "$tmp/out" "$tmp/err" >&2; fail "'$*' exited $got, want $want"; }
}
