#!/bin/bash
# tests/gpu/run.sh: the plugin under real NCCL, on a machine with one NVIDIA
# GPU and PyTorch (not CI: CI has no GPU). Two ranks on the one GPU, with
# NCCL_HOSTID different, so that NCCL sees two nodes and goes through the
# plugin: first NCCL_COLLNET_ENABLE=0 (ncclNet p2p), then 1 (CollNet: the
# aggregator path and the adaptive split), then CollNet with 4 ranks (the
# ring and the aggregators both carry data); every allreduce (f32, bf16,
# 4 KiB .. 64 MiB) checked against the reference (nccl_torch_check.py).
# NCCL loads our recording profiler plugin (libnccl-profiler-sumcast-rec.so,
# prof_record.c) in every mode; prof_check.py then fails the run when the
# net mode brought no Sumcast network-plugin event, or when any event of
# any mode did not close or did not nest under an open proxy step (the
# collnet modes: NCCL gives collnet calls no parent, so Sumcast's events
# there are those of the p2p net NCCL still uses, maybe none).
# Then what the plugin said of GPU memory under NCCL (its "GPU memory:"
# line: the CUDA driver, and whether the provider registers device memory),
# and bench/gpusum: the ring part's sum on the GPU against staging through
# host memory, every sum checked (docs/plugin.md "GPU memory").
# The tuner (docs/plugin.md "Tuner"): NCCL must load it from the plugin's
# library in every mode; the modes above run with SUMCAST_TUNER=0 (they test
# the CollNet path, which the tuner may rule out on one host's links); mode
# tuner4 is collnet4 with it on: results right, the tuner's line logged for
# 4 nodes, and which algorithms NCCL then took is reported (not judged).
# Last, bench/cores on the machine's cores (no GPU in it): one job's ingest
# over 1-8 data threads and the 8-byte allreduce with a core per process,
# what the project's 2-core host cannot show (reported; a failed run or a
# wrong sum fails).
#
#   tests/gpu/run.sh DIR OUT
#
# DIR is what tests/gpu/stage.sh BUILD DIR made: libnccl-net-sumcast.so,
# libnccl-profiler-sumcast-rec.so, sumcastd, gpusum and lib/ with the
# libraries they need that the machine lacks; OUT receives the logs, the
# results and the trace.
set -u
D=$(cd "$1" && pwd) OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib
[[ -f $D/libnccl-profiler-sumcast-rec.so ]] ||
  { echo "no $D/libnccl-profiler-sumcast-rec.so (tests/gpu/stage.sh copies it from BUILD/tests/gpu/)"; exit 1; }
echo "=== machine"
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader
echo "libfabric here: $(ldconfig -p | grep -c 'libfabric\.so') in ld.so.cache; $(ls -d /opt/amazon/efa /opt/hpcx 2>/dev/null | tr '\n' ' ')"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name(0))'
cat >"$OUT/sumcastd.conf" <<CONF
[control]
listen = 127.0.0.1
port = 17800
[http]
listen = 127.0.0.1
port = 17801
[fabric]
provider = tcp;ofi_rxm
node = 127.0.0.1
CONF
"$D/sumcastd" -c "$OUT/sumcastd.conf" >"$OUT/sumcastd.log" 2>&1 &
SD=$!
sleep 1
export NCCL_NET_PLUGIN=$D/libnccl-net-sumcast.so NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,COLL,TUNING
export SUMCAST_PROVIDER='tcp;ofi_rxm' SUMCAST_IFACE=127.0.0.1 SUMCAST_AGGREGATORS=127.0.0.1:17800
export NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
export NCCL_PROFILER_PLUGIN=$D/libnccl-profiler-sumcast-rec.so
rc=0
for mode in net collnet collnet4 tuner4; do
  world=2
  [[ $mode == collnet4 || $mode == tuner4 ]] && world=4
  if [[ $mode == collnet* || $mode == tuner4 ]]; then export NCCL_COLLNET_ENABLE=1 SUMCAST_TRACE=$OUT/trace-$mode; else export NCCL_COLLNET_ENABLE=0; fi
  if [[ $mode == tuner4 ]]; then export SUMCAST_TUNER=1; else export SUMCAST_TUNER=0; fi
  echo "=== $mode ($world ranks)"
  rm -rf "$OUT/prof-$mode"; mkdir -p "$OUT/prof-$mode"
  export SUMCAST_PROF_RECORD=$OUT/prof-$mode/prof
  timeout 240 python3 "$HERE/nccl_torch_check.py" "$OUT/res-$mode.txt" 1024,262144,1048576,16777216 \
    "$world" >"$OUT/log-$mode.txt" 2>&1 || rc=1
  cat "$OUT/res-$mode.txt" 2>/dev/null || rc=1
  grep -q WRONG "$OUT/res-$mode.txt" 2>/dev/null && rc=1
  grep -m6 -E "Loaded (net|collnet) plugin|via COLLNET|PROFILER/Plugin: Loaded|TUNER/Plugin: Using|tuner: comm" "$OUT/log-$mode.txt"
  min=1
  [[ $mode == collnet* || $mode == tuner4 ]] && min=0
  python3 "$HERE/prof_check.py" "$SUMCAST_PROF_RECORD" --min $min || rc=1
done
for mode in collnet collnet4; do
  grep -q "via COLLNET/Sumcast" "$OUT/log-$mode.txt" || { echo "$mode: CollNet did not go through Sumcast"; rc=1; }
done
echo "=== tuner"
for mode in net collnet collnet4 tuner4; do
  grep -q "TUNER/Plugin: Using Sumcast" "$OUT/log-$mode.txt" ||
    { echo "$mode: NCCL did not load the Sumcast tuner from the plugin's library"; rc=1; }
done
grep -q "tuner: comm .* 4 nodes" "$OUT/log-tuner4.txt" || { echo "tuner4: no tuner line for 4 nodes"; rc=1; }
grep -q "SUMCAST_TUNER=false" "$OUT/log-collnet.txt" || { echo "collnet: SUMCAST_TUNER=0 not taken"; rc=1; }
for mode in collnet4 tuner4; do
  echo "$mode: NCCL's choices (count, size, algorithm)"
  grep -oE "AllReduce: [0-9]+ Bytes -> Algo [A-Za-z_]+" "$OUT/log-$mode.txt" | sort | uniq -c | sort -k3n
done
echo "=== GPU memory (the plugin's line under NCCL, per mode: count, line)"
for mode in net collnet collnet4 tuner4; do
  grep -ho "GPU memory: .*" "$OUT/log-$mode.txt" | sort | uniq -c | sed "s/^/$mode /"
  grep -q "GPU memory: " "$OUT/log-$mode.txt" || { echo "$mode: no GPU memory line"; rc=1; }
done
kill $SD; wait $SD
echo "=== bench/gpusum"
if [[ -x $D/gpusum ]]; then
  timeout 120 "$D/gpusum" --reps 20 >"$OUT/gpusum.txt" 2>&1 || { echo "gpusum failed"; rc=1; }
  cat "$OUT/gpusum.txt"
fi
echo "=== bench/cores"
timeout 300 "$HERE/../../bench/cores" "$D" >"$OUT/cores.txt" 2>&1 || { echo "bench/cores failed"; rc=1; }
cat "$OUT/cores.txt"
exit $rc
