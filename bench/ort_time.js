// ONNX Runtime's latency on a model, the anchor of bench_model (scripts/install-bench-anchors.sh
// installs it): the CPU execution provider, every graph optimisation, THREADS intra-op threads
// (one inter-op), sequential execution, as ONNX Runtime is deployed on a CPU.  Reads the model's
// inputs from .npy files (float32), runs once to check the first output against EXPECTED.npy
// (the largest difference over the largest value, as bench_model checks ours), then times REPEAT
// runs after three warm-up runs and prints one JSON line: {"median_s", "min_s", "error"}.
//
// usage: node ort_time.js ORT_MODULE_DIR MODEL.onnx THREADS REPEAT EXPECTED.npy INPUT.npy...
//
// With ORT_TIME_PROFILE=FILE.json in the environment, ONNX Runtime's profiler runs too and FILE.json
// gets each node's median kernel time over the timed runs, in execution order, to set beside
// `tvm-net profile` (docs/models.md, "Kernel by kernel against ONNX Runtime"): a list of
// {"node", "op", "output_shapes", "median_us"}.  The profiler adds a little to every run.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

function readNpy(path) {
  const b = fs.readFileSync(path);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']*)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || descr[1] !== '<f4' || /'fortran_order':\s*True/.test(header))
    throw new Error(`${path}: a C-ordered float32 array is expected (${header.trim()})`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const off = start + hlen;
  const data = new Float32Array(b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length));
  return { dims, data };
}

// Each node's median kernel time over the last `runs` runs of the profile ONNX Runtime wrote.
function writeProfile(session, dir, out, runs) {
  session.endProfiling();
  const file = fs.readdirSync(dir).filter((f) => f.endsWith('.json'))[0];
  if (!file) throw new Error(`ONNX Runtime wrote no profile into ${dir}`);
  const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  const nodes = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!nodes.has(name)) {
      const shapes = (e.args.output_type_shape || []).map((o) => Object.values(o)[0]);
      nodes.set(name, { op: e.args.op_name, shapes, times: [] });
    }
    nodes.get(name).times.push(e.dur);
  }
  const list = [];
  for (const [node, { op, shapes, times }] of nodes) {
    const last = times.slice(-runs).sort((a, b) => a - b);
    list.push({ node, op, output_shapes: shapes, median_us: last[Math.floor(last.length / 2)] });
  }
  fs.writeFileSync(out, JSON.stringify(list, null, 1) + '\n');
  fs.rmSync(dir, { recursive: true, force: true });
}

async function main() {
  const [moduleDir, model, threads, repeat, expected, ...inputs] = process.argv.slice(2);
  const ort = require(moduleDir);
  const profileOut = process.env.ORT_TIME_PROFILE;
  const profileDir = profileOut ? fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-')) : null;
  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
  };
  if (profileOut) {
    options.enableProfiling = true;
    options.profileFilePrefix = path.join(profileDir, 'p');
  }
  const session = await ort.InferenceSession.create(model, options);
  if (inputs.length !== session.inputNames.length)
    throw new Error(`${model} takes ${session.inputNames.length} inputs, ${inputs.length} given`);
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const t = readNpy(inputs[i]);
    feeds[name] = new ort.Tensor('float32', t.data, t.dims);
  });
  const first = await session.run(feeds);
  const got = first[session.outputNames[0]].data;
  const want = readNpy(expected).data;
  if (got.length !== want.length)
    throw new Error(`output of ${got.length} values, ${want.length} expected`);
  let diff = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    diff = Math.max(diff, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  for (let i = 0; i < 3; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(repeat); i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  if (profileOut)
    writeProfile(session, profileDir, profileOut, Number(repeat));
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({
    median_s: times[Math.floor(times.length / 2)],
    min_s: times[0],
    error: scale > 0 ? diff / scale : diff,
    version: require(`${moduleDir}/package.json`).version,
  }));
}

main().catch((e) => {
  console.error(`ort_time: ${e.message}`);
  process.exit(1);
});
