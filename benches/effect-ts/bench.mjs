// Effect-TS's `Stream` (the npm package `effect`) on the stream bench's
// pipelines, as a second reference beside futures/tokio (see
// `benches/benches/stream.rs` for the Spindle and tokio rows). The same
// lengths, the same programs, one process per run of this script:
//
//   map_filter_fold  Stream.range over 10,000,000 numbers, map(x * 3),
//                    filter(even), runFold(sum); and the same as a plain
//                    JavaScript loop.
//   eval_map         100,000 elements, Stream.mapEffect of Effect.sync(x + 1).
//   par_eval_map8    100,000 elements, Stream.mapEffect with concurrency 8
//                    (in order) of Effect.yieldNow then x + 1.
//   socket_lines     100 MiB of 80-byte lines from one loopback connection
//                    (a worker thread writes 80 KiB blocks), decodeText,
//                    splitLines, runFold(count, bytes).
//
// Prints one line per row: the median, min and max of `ROUNDS` timed runs
// after `WARMUP` untimed ones, in milliseconds. Run: `bash run.sh`.
import { Effect, Stream } from "effect";
import net from "node:net";
import { Worker } from "node:worker_threads";

const PURE_LEN = 10_000_000;
const EVAL_LEN = 100_000;
const PAR_LEN = 100_000;
const LINE = 80;
const LINES_BYTES = 100 * 1024 * 1024;
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const WARMUP = Number(process.env.WARMUP ?? 3);

async function time(name, expected, run) {
  const times = [];
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    const start = process.hrtime.bigint();
    const value = await run();
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    if (JSON.stringify(value) !== JSON.stringify(expected)) {
      throw new Error(`${name}: got ${JSON.stringify(value)}, expected ${JSON.stringify(expected)}`);
    }
    if (i >= WARMUP) times.push(ms);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(`${name.padEnd(28)} median ${median.toFixed(2)} ms  (min ${times[0].toFixed(2)}, max ${times[times.length - 1].toFixed(2)}, ${ROUNDS} runs)`);
}

// The expected values, computed once without Effect.
let pureSum = 0;
for (let x = 0; x < PURE_LEN; x++) {
  const y = x * 3;
  if (y % 2 === 0) pureSum += y;
}
const evalSum = (EVAL_LEN * (EVAL_LEN + 1)) / 2;

await time("map_filter_fold effect", pureSum, () =>
  Effect.runPromise(
    Stream.range(0, PURE_LEN - 1).pipe(
      Stream.map((x) => x * 3),
      Stream.filter((x) => x % 2 === 0),
      Stream.runFold(() => 0, (acc, x) => acc + x),
    ),
  ));

await time("map_filter_fold plain loop", pureSum, async () => {
  let acc = 0;
  for (let x = 0; x < PURE_LEN; x++) {
    const y = x * 3;
    if (y % 2 === 0) acc += y;
  }
  return acc;
});

await time("eval_map effect", evalSum, () =>
  Effect.runPromise(
    Stream.range(0, EVAL_LEN - 1).pipe(
      Stream.mapEffect((x) => Effect.sync(() => x + 1)),
      Stream.runFold(() => 0, (acc, x) => acc + x),
    ),
  ));

await time("par_eval_map8 effect", evalSum, () =>
  Effect.runPromise(
    Stream.range(0, PAR_LEN - 1).pipe(
      Stream.mapEffect((x) => Effect.yieldNow.pipe(Effect.as(x + 1)), { concurrency: 8 }),
      Stream.runFold(() => 0, (acc, x) => acc + x),
    ),
  ));

// The socket rows: a worker thread connects and writes LINES_BYTES of
// 80-byte lines (79 'x' and '\n') in 80 KiB blocks, then closes.
const writer = `
  const { workerData } = require("node:worker_threads");
  const net = require("node:net");
  const line = "x".repeat(${LINE - 1}) + "\\n";
  const block = Buffer.from(line.repeat(1024));
  const socket = net.connect(workerData.port, "127.0.0.1", () => {
    let left = ${LINES_BYTES} / block.length;
    const write = () => {
      while (left > 0) {
        left--;
        if (!socket.write(block)) { socket.once("drain", write); return; }
      }
      socket.end();
    };
    write();
  });
`;
const server = net.createServer({ noDelay: true });
const connections = [];
let waiting = null;
server.on("connection", (socket) => {
  if (waiting) { const w = waiting; waiting = null; w(socket); } else connections.push(socket);
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const port = server.address().port;
const accept = () => {
  new Worker(writer, { eval: true, workerData: { port } });
  return connections.length > 0 ? Promise.resolve(connections.shift()) : new Promise((resolve) => { waiting = resolve; });
};
const lines = LINES_BYTES / LINE;
await time("socket_lines effect", [lines, lines * (LINE - 1)], async () => {
  const socket = await accept();
  return Effect.runPromise(
    Stream.fromAsyncIterable(socket, (e) => e).pipe(
      Stream.decodeText,
      Stream.splitLines,
      Stream.runFold(() => [0, 0], ([n, bytes], line) => [n + 1, bytes + line.length]),
    ),
  );
});
await time("socket_lines node readline", [lines, lines * (LINE - 1)], async () => {
  const socket = await accept();
  const { createInterface } = await import("node:readline");
  let n = 0, bytes = 0;
  for await (const line of createInterface({ input: socket, crlfDelay: Infinity })) { n++; bytes += line.length; }
  return [n, bytes];
});
server.close();
