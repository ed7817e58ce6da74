// The app side of web/uiapjs_test.go: web/uiap.js on Node.js (global
// WebSocket) dialing the Go test's raw peer.
import { connectApp, UIAPError } from '../uiap.js';

const app = await connectApp(process.argv[2], {
  source: { role: 'app', id: 'node-app' },
  capabilities: { roles: ['tester'], actions: [{ id: 'echo' }, { id: 'slow' }, { id: 'fail' }, { id: 'publish' }], risk: { echo: 'low' } },
  actions: {
    echo: async (args) => args,
    slow: async (args, ctx) => {
      ctx.progress(0.5, 'half');
      await new Promise((resolve, reject) => {
        const t = setTimeout(resolve, args.ms ?? 10);
        ctx.signal.addEventListener('abort', () => { clearTimeout(t); reject(ctx.signal.reason); });
      });
      return { done: true };
    },
    fail: async () => { throw new UIAPError('bad_request', 'no such thing', { why: 'test' }); },
    crash: async () => { throw new Error('secret internal detail'); },
    publish: async () => {
      app.publish({ roles: ['tester'], actions: [{ id: 'echo' }] }, 'test');
      app.signal('test.signal', { x: 1 });
      return {};
    },
  },
});
await app.closed;
