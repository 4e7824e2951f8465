#!/usr/bin/env bash
# Regenerates the real tool outputs under tests/samples/ with the installed
# fio, ioping and dd (small files, short runs).  The files named *-docs.* are
# written by hand from the formats' documentation and are not regenerated:
# see tests/samples/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f="$work/f"
common=(--filename="$f" --size=8m --direct=1 --ioengine=libaio --runtime=1 --time_based)

fio --name=randrw "${common[@]}" --rw=randrw --bs=4k --iodepth=4 --output-format=json > "$here/fio/randrw-3.json"
fio --name=seqread "${common[@]}" --rw=read --bs=1m --iodepth=8 --output-format=json+ > "$here/fio/seqread-3.jsonplus"
fio --name=two "${common[@]}" --rw=randread --bs=4k --numjobs=2 --output-format=json > "$here/fio/numjobs2-3.json"
fio --name=grp "${common[@]}" --rw=randwrite --bs=4k --numjobs=2 --group_reporting --output-format=json > "$here/fio/group-reporting-3.json"
fio --name=randrw "${common[@]}" --rw=randrw --bs=4k --iodepth=4 --output-format=terse > "$here/fio/randrw-3.terse"
fio --name=randread "${common[@]}" --rw=randread --bs=4k --output-format=terse --terse-version=4 > "$here/fio/randread-v4.terse"
fio --name=randrw "${common[@]}" --rw=randrw --bs=4k --iodepth=4 > "$here/fio/randrw-3.txt"
# The same run in three formats at once: the parsers must agree.
fio --name=all "${common[@]}" --rw=randread --bs=4k --iodepth=2 \
    --output-format=json,terse,normal > "$here/fio/all-formats-3.txt"
# fio prints warnings before its JSON sometimes.
{ echo "fio: this platform does not support process shared mutexes, forcing use of threads."; \
  fio --name=warn "${common[@]}" --rw=write --bs=64k --output-format=json; } > "$here/fio/leading-junk-3.json"

mkdir -p "$work/d"
ioping -c 5 -i 0.05 "$work/d" > "$here/ioping/read-1.3.txt"
ioping -c 5 -i 0.05 -W "$work/d" > "$here/ioping/write-1.3.txt"
ioping -c 5 -i 0.05 -s 64k -B "$work/d" > "$here/ioping/read-64k-1.3.batch"
ioping -c 5 -i 0.05 -J "$work/d" > "$here/ioping/read-1.3.json"
ioping -c 5 -i 0.05 -W -J "$work/d" > "$here/ioping/write-1.3.json"
# Issue 29: the agent's own time-bounded command (-w, one request per 10 ms,
# O_DIRECT on a file), as -J and as text.
dd if=/dev/zero of="$work/t" bs=1M count=16 status=none
ioping -w 1 -i 0.01 -D -s 4k -J "$work/t" > "$here/ioping/timed-read-1.3.json"
ioping -w 1 -i 0.01 -D -s 4k "$work/t" > "$here/ioping/timed-read-1.3.txt"

for loc in C de_DE.UTF-8 fr_FR.UTF-8 zh_CN.UTF-8; do
    name=$(echo "$loc" | cut -d. -f1 | tr '[:upper:]' '[:lower:]')
    LC_ALL=$loc dd if=/dev/zero of="$work/dd" bs=1M count=16 conv=fdatasync 2> "$here/dd/gnu-$name.txt"
done
# Issue 12's samples: two different jobs in one output, dd's status=progress
# lines (\r-separated, the final statistics after "records out"), ioping's
# rapid mode ("31.2 k requests completed"), and busybox dd as Debian builds
# it (no third status line: nothing to measure).
(cd "$work" && fio --output-format=json \
    --name=seqread --filename=f --size=8m --direct=1 --ioengine=libaio --runtime=1 --time_based --rw=read --bs=1m \
    --name=randwrite --filename=f --size=8m --direct=1 --ioengine=libaio --runtime=1 --time_based --rw=randwrite --bs=4k \
    > "$here/fio/two-jobs-3.json" 2>/dev/null)
LC_ALL=C dd if=/dev/urandom of=/dev/null bs=1M count=1500 status=progress 2> "$here/dd/gnu-9.1-progress.txt"
(cd "$work" && ioping -R d > "$here/ioping/rapid-1.3.txt")
if command -v busybox > /dev/null; then
    busybox dd if=/dev/zero of="$work/bb" bs=1M count=4 conv=fsync 2> "$here/dd/busybox-1.35-no-stats.txt"
fi
echo "regenerated under $here"
