#!/usr/bin/env bash
# Outputs that are not plain files (README, "Outputs are whole or absent"):
# a symbolic link is written through and stays a link; a FIFO, /dev/null,
# /dev/full and /dev/stdout are written into, never replaced, and nothing
# appears beside them.
#   output_kinds_test.sh CASE BIN_DIR SOURCE_DIR
#
# The cases that name real device nodes first run the same writes through
# links to /dev/null in $tmp (require_devices_safe): tools that replaced what
# they are given, as they once did (issue 11), fail there, as root too,
# before they can replace /dev/full or /dev/stdout or litter /dev.
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

data=$src/programs/data/mlp2
"$bin/tpu-as" "$src/programs/mlp2.s" -o "$tmp/p.tpu"
run=("$bin/tpu-sim" run "$tmp/p.tpu" --hostmem "$data/host.npy" --weights "$data/weights.npy")

# The folder's entries, hidden ones included, each with its type (f: file,
# d: folder, l: link, p: FIFO).
listing() { (cd "$1" && find . -mindepth 1 -printf '%p(%y)\n' | LC_ALL=C sort | tr '\n' ' '); }

# A device node's type, device numbers and inode, to show it is still the same node.
node() { stat -c '%F %t:%T %i' "$1"; }

# read_fifo FIFO FILE: copies FIFO to FILE in the background (pid in $reader);
# gives up after 60 s, so that a tool that never opens the FIFO fails the
# test rather than hanging it.
read_fifo() {
  timeout 60 cat "$1" >"$2" &
  reader=$!
}

require_devices_safe() {
  mkdir "$tmp/probe"
  for f in out stats w.vcd; do ln -s /dev/null "$tmp/probe/$f"; done
  expect_status 0 "${run[@]}" --out "$tmp/probe/out" --stats "$tmp/probe/stats" \
    --vcd "$tmp/probe/w.vcd"
  [ "$(listing "$tmp/probe")" = "./out(l) ./stats(l) ./w.vcd(l) " ] ||
    fail "writes through links to /dev/null left $(listing "$tmp/probe"); not trying /dev"
  rm -r "$tmp/probe"
}

case "$case_name" in
  as_link)  # tpu-as -o LINK: the file the links name is replaced; the links stay
    mkdir "$tmp/d" "$tmp/d/sub"
    echo "previous contents" >"$tmp/d/sub/prog.tpu"
    ln -s sub/prog.tpu "$tmp/d/link.tpu"
    ln -s link.tpu "$tmp/d/chain.tpu"
    expect_status 0 "$bin/tpu-as" "$src/programs/mlp2.s" -o "$tmp/d/chain.tpu"
    cmp "$tmp/p.tpu" "$tmp/d/sub/prog.tpu" || fail "the linked file is not the program"
    [ "$(readlink "$tmp/d/chain.tpu")" = link.tpu ] || fail "chain.tpu is no longer a link"
    [ "$(readlink "$tmp/d/link.tpu")" = sub/prog.tpu ] || fail "link.tpu is no longer a link"
    [ "$(listing "$tmp/d")" = "./chain.tpu(l) ./link.tpu(l) ./sub(d) ./sub/prog.tpu(f) " ] ||
      fail "left $(listing "$tmp/d")"
    # A dangling link: its file is created.
    ln -s made.s "$tmp/d/listing.s"
    expect_status 0 "$bin/tpu-dis" "$tmp/p.tpu" -o "$tmp/d/listing.s"
    [ -L "$tmp/d/listing.s" ] && [ -f "$tmp/d/made.s" ] || fail "dangling link: $(listing "$tmp/d")"
    grep -q '^HLT' "$tmp/d/made.s" || fail "made.s is not the listing"
    ;;
  fifo)  # tpu-sim run --out FIFO: the bytes arrive; the FIFO stays a FIFO
    expect_status 0 "${run[@]}" --out "$tmp/o.npy"
    mkdir "$tmp/d"
    mkfifo "$tmp/d/fifo"
    read_fifo "$tmp/d/fifo" "$tmp/got.npy"
    expect_status 0 "${run[@]}" --out "$tmp/d/fifo"
    wait "$reader" || fail "the FIFO's reader got no end of file"
    cmp "$tmp/o.npy" "$tmp/got.npy" || fail "the FIFO's reader got other bytes than --out"
    [ "$(listing "$tmp/d")" = "./fifo(p) " ] || fail "left $(listing "$tmp/d")"
    ;;
  stdout_head)  # --stats /dev/stdout | head -1: the summary's first line, status 0
    require_devices_safe
    set +e
    "${run[@]}" --stats /dev/stdout 2>"$tmp/err" | head -1 >"$tmp/line"
    status=("${PIPESTATUS[@]}")
    set -e
    [ "${status[0]}" -eq 0 ] || { cat "$tmp/err"; fail "tpu-sim exited ${status[0]}"; }
    grep -Eqx 'cycles +[0-9]+' "$tmp/line" || fail "first line '$(cat "$tmp/line")'"
    [ ! -s "$tmp/err" ] || { cat "$tmp/err"; fail "messages on stderr"; }
    # All of it: the statistics follow the summary (what the tool printed comes first).
    expect_status 0 "${run[@]}" --stats /dev/stdout
    sed -n '/^{$/,$p' "$tmp/out" >"$tmp/stats.json"
    /usr/bin/python3 -c "import json; json.load(open('$tmp/stats.json'))" || fail "stats JSON"
    head -1 "$tmp/out" | grep -Eqx 'cycles +[0-9]+' || fail "the summary does not come first"
    # A reader that goes while the tool still writes (a waveform more than a pipe
    # holds): no error, and the tool finishes its other outputs.
    { for _ in $(seq 40); do echo "RHM 0, 0, 64"; echo "WHM 0, 64, 64"; done; echo HLT; } \
      >"$tmp/big.s"
    "$bin/tpu-as" "$tmp/big.s" -o "$tmp/big.tpu"
    mkdir "$tmp/d"
    set +e
    "$bin/tpu-sim" run "$tmp/big.tpu" --vcd /dev/stdout --out "$tmp/d/o.npy" 2>"$tmp/err" |
      head -1 >"$tmp/line"
    status=("${PIPESTATUS[@]}")
    set -e
    [ "${status[0]}" -eq 0 ] ||
      { cat "$tmp/err"; fail "--vcd /dev/stdout | head: exited ${status[0]}"; }
    [ "$(cat "$tmp/line")" = '$date' ] || fail "VCD's first line '$(cat "$tmp/line")'"
    [ ! -s "$tmp/err" ] || { cat "$tmp/err"; fail "messages on stderr"; }
    [ "$(listing "$tmp/d")" = "./o.npy(f) " ] || fail "after --vcd /dev/stdout: $(listing "$tmp/d")"
    # No save file beside /dev/stdout, nothing in /dev.
    [ ! -e /dev/stdout.gtkw ] && [ ! -e /dev/stdout.vcd ] || fail "files in /dev"
    ;;
  dev_full)  # --out /dev/full: status 3, one line; /dev/full stays the device
    require_devices_safe
    before=$(node /dev/full)
    expect_status 3 "${run[@]}" --out /dev/full
    [ "$(cat "$tmp/err")" = "tpu-sim: error: /dev/full: write failed: No space left on device" ] ||
      { cat "$tmp/err"; fail "--out /dev/full message"; }
    [ "$(node /dev/full)" = "$before" ] || fail "/dev/full is now $(node /dev/full)"
    # The same through a link, with a waveform, which is copied in when complete.
    ln -s /dev/full "$tmp/full.vcd"
    expect_status 3 "${run[@]}" --vcd "$tmp/full.vcd"
    want="tpu-sim: error: $tmp/full.vcd: write failed: No space left on device"
    [ "$(cat "$tmp/err")" = "$want" ] ||
      { cat "$tmp/err"; fail "--vcd LINK-TO-/dev/full message"; }
    [ "$(readlink "$tmp/full.vcd")" = /dev/full ] || fail "full.vcd is no longer a link"
    [ ! -e "$tmp/full.gtkw" ] || fail "a .gtkw beside a link to /dev/full"
    ;;
  vcd_link)  # --vcd LINK: the waveform goes to the linked file, the .gtkw beside the link
    expect_status 0 "${run[@]}" --vcd "$tmp/w.vcd"
    mkdir "$tmp/d" "$tmp/d/sub"
    ln -s sub/real.vcd "$tmp/d/w.vcd"
    expect_status 0 "${run[@]}" --vcd "$tmp/d/w.vcd"
    cmp "$tmp/w.vcd" "$tmp/d/sub/real.vcd" || fail "the linked file is not the waveform"
    [ "$(readlink "$tmp/d/w.vcd")" = sub/real.vcd ] || fail "w.vcd is no longer a link"
    grep -qxF "[dumpfile] \"$tmp/d/w.vcd\"" "$tmp/d/w.gtkw" || fail ".gtkw names the link"
    [ "$(listing "$tmp/d")" = "./sub(d) ./sub/real.vcd(f) ./w.gtkw(f) ./w.vcd(l) " ] ||
      fail "left $(listing "$tmp/d")"
    # A link to a FIFO: the waveform goes into it, with no .gtkw.
    mkfifo "$tmp/d/fifo"
    ln -s fifo "$tmp/d/f.vcd"
    read_fifo "$tmp/d/fifo" "$tmp/got.vcd"
    expect_status 0 "${run[@]}" --vcd "$tmp/d/f.vcd"
    wait "$reader" || fail "the FIFO's reader got no end of file"
    cmp "$tmp/w.vcd" "$tmp/got.vcd" || fail "the FIFO's reader got another waveform"
    want="./f.vcd(l) ./fifo(p) ./sub(d) ./sub/real.vcd(f) ./w.gtkw(f) ./w.vcd(l) "
    [ "$(listing "$tmp/d")" = "$want" ] || fail "left $(listing "$tmp/d")"
    ;;
  dev_null)  # --out /dev/null: status 0; /dev/null stays the device
    require_devices_safe
    before=$(node /dev/null)
    expect_status 0 "${run[@]}" --out /dev/null --stats /dev/null
    [ ! -s "$tmp/err" ] || { cat "$tmp/err"; fail "messages on stderr"; }
    [ "$(node /dev/null)" = "$before" ] || fail "/dev/null is now $(node /dev/null)"
    ;;
  both_fifo)  # --engine both --vcd FIFO: a usage error, nothing written (no NAME.rtl.vcd beside it)
    mkdir "$tmp/d"
    mkfifo "$tmp/d/fifo"
    ln -s fifo "$tmp/d/w.vcd"
    expect_status 2 "${run[@]}" --engine both --vcd "$tmp/d/w.vcd"
    grep -q "name a file, not a device or FIFO" "$tmp/err" || { cat "$tmp/err"; fail "message"; }
    expect_status 2 "${run[@]}" --engine both --fst "$tmp/d/fifo"
    [ "$(listing "$tmp/d")" = "./fifo(p) ./w.vcd(l) " ] || fail "left $(listing "$tmp/d")"
    ;;
  fifo_input)  # an input that is a FIFO: without a writer one line and status 3 (it hung); with one, its bytes
    mkfifo "$tmp/w.fifo"
    run_fifo=("$bin/tpu-sim" run "$tmp/p.tpu" --hostmem "$data/host.npy" --weights "$tmp/w.fifo")
    expect_status 3 timeout 60 "${run_fifo[@]}"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "w.fifo" "$tmp/err" || { cat "$tmp/err"; fail "message"; }
    expect_status 0 "${run[@]}" --out "$tmp/o.npy"
    expect_status 0 timeout 60 "$bin/tpu-sim" run "$tmp/p.tpu" --hostmem "$data/host.npy" \
      --weights <(cat "$data/weights.npy") --out "$tmp/o2.npy"
    cmp "$tmp/o.npy" "$tmp/o2.npy" || fail "weights through a pipe gave another output"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"
