// A real gRPC client (grpc-js) for the functional tests.
// Usage: node client.js <scenario> <host:port> [--tls <ca.pem>] [--call-id <id>] [--metadata <key>=<value>]...
// --metadata adds a request header to every call (a proxy routes on it; a test backend reacts to it).
// --deadline-ms sets the deadline of the 'deadline' scenario (default 300).
// Prints one JSON object on stdout describing what the client saw; exits 0 when the scenario ran to its
// end (even when the call ended with the error status the scenario expects), 2 on a timeout or a crash.
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const SCENARIO_TIMEOUT_MS = 15000;

function parseArgs(argv) {
  const [scenario, address, ...rest] = argv;
  const options = { scenario, address, tls: null, callId: 'none', metadata: [], deadlineMs: 300 };
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--tls') options.tls = rest[++i];
    else if (rest[i] === '--call-id') options.callId = rest[++i];
    else if (rest[i] === '--deadline-ms') options.deadlineMs = Number(rest[++i]);
    else if (rest[i] === '--metadata') {
      const pair = rest[++i] || '';
      const split = pair.indexOf('=');
      if (split <= 0) throw new Error(`--metadata wants key=value, got '${pair}'`);
      options.metadata.push([pair.slice(0, split), pair.slice(split + 1)]);
    }
    else throw new Error(`unknown argument ${rest[i]}`);
  }
  if (!scenario || !address) throw new Error('usage: client.js <scenario> <host:port> [--tls <ca.pem>] [--call-id <id>] [--metadata <key>=<value>]... [--deadline-ms <ms>]');
  return options;
}

function createClient(options) {
  const definition = protoLoader.loadSync(path.join(__dirname, '..', '..', '..', 'src', 'Proxy.Demo', 'Grpc', 'echo.proto'), {
    keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
  });
  const proto = grpc.loadPackageDefinition(definition).proxy.interop;
  // Every call carries the --metadata pairs, added by an interceptor so no scenario has to know.
  const addMetadata = (callOptions, nextCall) => new grpc.InterceptingCall(nextCall(callOptions), {
    start(metadata, listener, next) {
      for (const [key, value] of options.metadata) metadata.add(key, value);
      next(metadata, listener);
    },
  });
  const interceptors = options.metadata.length > 0 ? [addMetadata] : [];
  if (options.tls) {
    const credentials = grpc.credentials.createSsl(fs.readFileSync(options.tls));
    // The certificate is issued to "localhost"; we dial 127.0.0.1.
    return new proto.Echo(options.address, credentials, {
      'grpc.ssl_target_name_override': 'localhost',
      'grpc.default_authority': 'localhost',
      interceptors,
    });
  }
  return new proto.Echo(options.address, grpc.credentials.createInsecure(), { interceptors });
}

const sha256 = (buffer) => crypto.createHash('sha256').update(buffer).digest('hex');
const status = (error) => ({ code: error ? error.code : 0, details: error ? error.details : '' });
const reply = (r) => ({ message: r.message, sequence: r.sequence, count: r.count });

function unary(client) {
  const payload = crypto.randomBytes(100 * 1024);
  return new Promise((resolve) => {
    client.Unary({ message: 'hello', sequence: 7, payload }, (error, response) => {
      resolve({
        ...status(error),
        reply: response ? reply(response) : null,
        payloadSent: sha256(payload),
        payloadReceived: response ? sha256(response.payload) : null,
      });
    });
  });
}

function collectStream(call) {
  return new Promise((resolve) => {
    const replies = [];
    let headers = null;
    call.on('metadata', (metadata) => { headers = metadata.getMap(); });
    call.on('data', (r) => replies.push(reply(r)));
    call.on('error', (error) => resolve({ ...status(error), replies, headers }));
    call.on('status', (s) => { if (s.code === 0) resolve({ code: 0, details: s.details, replies, headers, trailers: s.metadata.getMap() }); });
  });
}

function serverStream(client) {
  return collectStream(client.ServerStream({ message: 'tick', count: 5 }));
}

function errorAfterReplies(client) {
  return collectStream(client.ServerStream({ message: 'tick', count: 2, fail_code: 9, fail_message: 'stopped after 2' }));
}

function clientStream(client) {
  return new Promise((resolve) => {
    const call = client.ClientStream((error, response) => resolve({ ...status(error), reply: response ? reply(response) : null }));
    for (let i = 0; i < 5; i++) call.write({ message: `m${i}`, sequence: i, payload: Buffer.alloc(1000, i) });
    call.end();
  });
}

// Ping-pong: message i+1 is written only after reply i arrived, so every message must be flushed alone.
function bidi(client) {
  return new Promise((resolve) => {
    const call = client.Bidi();
    const replies = [];
    const rounds = 5;
    call.on('data', (r) => {
      replies.push(reply(r));
      if (replies.length < rounds) call.write({ message: `ping ${replies.length}`, sequence: replies.length });
      else call.end();
    });
    call.on('error', (error) => resolve({ ...status(error), replies }));
    call.on('status', (s) => { if (s.code === 0) resolve({ code: 0, details: s.details, replies }); });
    call.write({ message: 'ping 0', sequence: 0 });
  });
}

// Nothing is written until the server's response headers (metadata) arrived.
function bidiHeadersFirst(client) {
  return new Promise((resolve) => {
    const call = client.BidiHeadersFirst();
    const replies = [];
    let metadataBeforeFirstWrite = false;
    let serverReady = null;
    call.on('metadata', (metadata) => {
      metadataBeforeFirstWrite = true;
      serverReady = metadata.get('x-server-ready')[0] || null;
      for (let i = 0; i < 3; i++) call.write({ message: `after headers ${i}`, sequence: i });
      call.end();
    });
    call.on('data', (r) => replies.push(reply(r)));
    call.on('error', (error) => resolve({ ...status(error), replies, metadataBeforeFirstWrite, serverReady }));
    call.on('status', (s) => {
      if (s.code === 0) {
        resolve({ code: 0, replies, metadataBeforeFirstWrite, serverReady, trailers: s.metadata.getMap() });
      }
    });
  });
}

function deadline(client, options) {
  // Connect first (TCP, TLS, HTTP/2 preface): on a busy machine a cold handshake can outlast a 300 ms
  // deadline, and the call would then end on the client without ever reaching the server under test.
  return new Promise((resolve, reject) => {
    client.waitForReady(new Date(Date.now() + 10000), (error) => (error ? reject(error) : resolve()));
  }).then(() => {
    const started = Date.now();
    const call = client.Wait({ call_id: options.callId, replies_first: 0 }, { deadline: new Date(started + options.deadlineMs) });
    return collectStream(call).then((result) => ({ ...result, elapsedMs: Date.now() - started }));
  });
}

// Wait with no deadline and no reply first: the call ends however the other side (or a proxy) ends it.
function wait(client, options) {
  return collectStream(client.Wait({ call_id: options.callId, replies_first: 0 }));
}

function cancel(client, options) {
  return new Promise((resolve) => {
    const call = client.Wait({ call_id: options.callId, replies_first: 1 });
    const replies = [];
    call.on('data', (r) => {
      replies.push(reply(r));
      call.cancel();
    });
    call.on('error', (error) => resolve({ ...status(error), replies }));
    call.on('status', (s) => { if (s.code === 0) resolve({ code: 0, replies }); });
  });
}

function fail(client) {
  return new Promise((resolve) => {
    client.Fail({ code: 5, detail: 'no such thing: caf\u00e9 100%' }, (error, response) => {
      resolve({ ...status(error), reply: response ? reply(response) : null });
    });
  });
}

const scenarios = {
  'unary': unary,
  'server-stream': serverStream,
  'client-stream': clientStream,
  'bidi': bidi,
  'bidi-headers-first': bidiHeadersFirst,
  'deadline': deadline,
  'cancel': cancel,
  'wait': wait,
  'error': fail,
  'error-after-replies': errorAfterReplies,
};

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const run = scenarios[options.scenario];
  if (!run) throw new Error(`unknown scenario ${options.scenario}; known: ${Object.keys(scenarios).join(', ')}`);
  const client = createClient(options);
  const timeout = new Promise((_, reject) => {
    setTimeout(() => reject(new Error(`scenario ${options.scenario} did not finish within ${SCENARIO_TIMEOUT_MS} ms`)), SCENARIO_TIMEOUT_MS).unref();
  });
  const result = await Promise.race([run(client, options), timeout]);
  client.close();
  process.stdout.write(JSON.stringify({ scenario: options.scenario, ...result }) + '\n');
}

main().then(() => process.exit(0), (error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }) + '\n');
  process.exit(2);
});
