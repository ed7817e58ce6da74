// Driver of e2e/console_test.go: the web console (/console/) in headless
// Chromium (playwright-core, Debian's chromium).
//
//   node console.mjs flow   URL TOKEN KEYFILE SHOTDIR CHROMIUM
//   node console.mjs stream URL TOKEN RUNAGENT SHOTDIR CHROMIUM
//
// flow: log in with the token; start the support agent's refund run from
// the agents page; see it pause live; approve it in the inbox with the
// approver key signed in the page; see it deliver live and its audit
// chain verify; deny a second refund and see the denial in its run; the
// runs list and the workflows page. Screenshots of each page go to
// SHOTDIR. Prints one JSON line of what the page showed.
//
// stream: log in, start a run of RUNAGENT from the agents page, print
// "READY <run id>" once the run page follows its events live, then wait
// for the run to end and print one JSON line: the events the page
// rendered and the text it shows.
//
// Exits 1 (printing why on stderr) when a step fails.
import { chromium } from 'playwright-core';

const [mode, url, token, arg, shots, executablePath = '/usr/bin/chromium'] = process.argv.slice(2);
if (!mode || !url || !token || !arg || !shots) {
  console.error('usage: node console.mjs flow|stream URL TOKEN KEYFILE|AGENT SHOTDIR [CHROMIUM]');
  process.exit(2);
}
const timeout = 60_000;
const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
const consoleLines = [];
let code = 0;
let step = 'start';
let page;
try {
  page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  const out = mode === 'flow' ? await flow(page) : await stream(page);
  console.log(JSON.stringify({ ...out, console: consoleLines }));
} catch (e) {
  code = 1;
  console.error(`step ${step}: ${e.stack || e}`);
  console.error(consoleLines.join('\n'));
  if (page) await page.screenshot({ path: `${shots}/console-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
process.exit(code);

async function login(page) {
  step = 'login page';
  const resp = await page.goto(`${url}/console/`, { waitUntil: 'load' });
  const status = resp.status();
  await page.waitForSelector('input#token');
  if (mode === 'flow') await page.screenshot({ path: `${shots}/console-login.png` });
  step = 'log in';
  await page.fill('input#token', token);
  await Promise.all([page.waitForURL(`${url}/console/`), page.click('button[type=submit]')]);
  await page.waitForSelector('header nav');
  // The login page itself is a 401, which the browser logs as a failed
  // load: what counts is what the console logs from here on.
  consoleLines.length = 0;
  const cookies = await page.context().cookies();
  const c = cookies.find((x) => x.name === 'agentry_session');
  return { loginStatus: status, cookie: c ? { httpOnly: c.httpOnly, sameSite: c.sameSite } : null };
}

// startRun starts a run of agent with input from the agents page and
// returns its ID once the run page shows it.
async function startRun(page, agent, input) {
  step = `start ${agent}`;
  await page.goto(`${url}/console/#/agents`);
  const form = page.locator(`form.start[data-agent="${agent}"]`);
  await form.locator('textarea').fill(input);
  await form.locator('button[type=submit]').click();
  await page.waitForURL(/#\/runs\/[^/]+$/);
  return decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
}

// decided waits until the inbox card of run's request shows the decision
// (or is gone, once decided).
async function decided(page, run, decision) {
  await page.waitForFunction(([r, d]) => {
    const c = [...document.querySelectorAll('section[data-approval]')].find((s) => s.querySelector(`a[href="#/runs/${r}"]`));
    return !c || c.dataset.decided === d;
  }, [run, decision]);
}

async function statusIs(page, status) {
  await page.waitForFunction((s) => document.querySelector('#run-status .badge')?.textContent === s, status.replace('_', ' '));
}

async function events(page) {
  return page.evaluate(() => [...document.querySelectorAll('#events > li')].map((li) => ({ type: li.dataset.type, text: li.textContent })));
}

async function flow(page) {
  const res = await login(page);
  step = 'agents page';
  await page.goto(`${url}/console/#/agents`);
  await page.waitForSelector('form.start[data-agent="support"]');
  res.agentTools = await page.locator('section:has(form.start[data-agent="support"]) tbody tr').allTextContents();
  await page.screenshot({ path: `${shots}/console-agents.png`, fullPage: true });

  // A refund: it pauses for a human, live.
  const run = await startRun(page, 'support', 'please refund order o-1001');
  res.run = run;
  step = 'run pauses';
  await page.waitForSelector('#events li[data-type="paused"]');
  await statusIs(page, 'paused');
  await page.waitForSelector('#pending a[href="#/approvals"]');
  res.pausedEvents = (await events(page)).map((e) => e.type);
  await page.screenshot({ path: `${shots}/console-run-paused.png`, fullPage: true });

  // The inbox: load the key, approve.
  step = 'approvals inbox';
  await page.click('header nav a[data-nav="approvals"]');
  const card = page.locator(`section[data-approval]:has(a[href="#/runs/${run}"])`);
  await card.waitFor();
  res.approvalCard = await card.locator('h2').textContent();
  res.approvalArgs = await card.locator('pre.args').textContent();
  res.approvalRollback = (await card.locator('pre.rollback').count()) ? await card.locator('pre.rollback').textContent() : '';
  res.approvalCommand = await card.locator('pre.command').textContent();
  await page.setInputFiles('#key-file', arg);
  await page.waitForFunction(() => document.getElementById('key-status').textContent.startsWith('Signing as'));
  res.keyStatus = await page.locator('#key-status').textContent();
  await page.screenshot({ path: `${shots}/console-approvals.png`, fullPage: true });
  step = 'approve';
  await card.locator('textarea').fill('customer verified by phone');
  await card.locator('button.approve').click();
  await decided(page, run, 'approved');

  // The run delivers, live; its audit chain verifies.
  step = 'run delivers';
  await page.goto(`${url}/console/#/runs/${encodeURIComponent(run)}`);
  await statusIs(page, 'delivered');
  await page.waitForSelector('#output');
  res.output = await page.locator('#output').textContent();
  await page.waitForSelector('#chain');
  res.chain = await page.locator('#chain').textContent();
  res.auditRows = await page.locator('#audit-records tbody tr').count();
  res.deliveredEvents = (await events(page)).map((e) => e.type);
  res.approvedEvent = await page.locator('#events li[data-type="approval_decided"]').first().textContent();
  await page.screenshot({ path: `${shots}/console-run-delivered.png`, fullPage: true });

  // A second refund, denied.
  const denied = await startRun(page, 'support', 'please refund order o-1002');
  res.deniedRun = denied;
  step = 'second run pauses';
  await page.waitForSelector('#events li[data-type="paused"]');
  step = 'deny';
  await page.goto(`${url}/console/#/approvals`);
  const card2 = page.locator(`section[data-approval]:has(a[href="#/runs/${denied}"])`);
  await card2.waitFor();
  await card2.locator('input.approver').fill('bob');
  await card2.locator('textarea').fill('refunds are frozen this week');
  await card2.locator('button.deny').click();
  await decided(page, denied, 'denied');
  step = 'denied run';
  await page.goto(`${url}/console/#/runs/${encodeURIComponent(denied)}`);
  await page.waitForSelector('#events li.e-approval_decided.denied');
  res.deniedEvent = await page.locator('#events li.e-approval_decided.denied').textContent();
  await page.waitForSelector('#answer:not([hidden])');
  res.deniedStatus = await page.locator('#run-status .badge').textContent();
  res.deniedAnswer = await page.locator('#answer').textContent();

  step = 'runs list';
  await page.goto(`${url}/console/#/runs`);
  await page.waitForSelector('#runs tbody tr');
  res.runsRows = await page.locator('#runs tbody tr').count();
  res.runsStatuses = await page.locator('#runs tbody tr td:nth-child(3) .badge').allTextContents();
  await page.screenshot({ path: `${shots}/console-runs.png`, fullPage: true });

  step = 'workflows';
  await page.goto(`${url}/console/#/workflows`);
  await page.waitForSelector('.sessions table, .sessions p');
  res.workflowSessions = await page.locator('.sessions tbody tr').allTextContents();
  await page.screenshot({ path: `${shots}/console-workflows.png`, fullPage: true });

  step = 'phone';
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${url}/console/#/runs/${encodeURIComponent(run)}`);
  await statusIs(page, 'delivered');
  res.phoneOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await page.screenshot({ path: `${shots}/console-phone.png`, fullPage: false });
  return res;
}

async function stream(page) {
  const res = await login(page);
  const run = await startRun(page, arg, 'stream');
  step = 'follow live';
  await page.waitForFunction(() => document.getElementById('stream-state')?.textContent === 'live');
  console.log(`READY ${run}`);
  step = 'run ends';
  await statusIs(page, 'delivered');
  await page.waitForFunction(() => document.getElementById('stream-state')?.textContent === 'complete');
  // Every event the page received is rendered (the last frame).
  await page.waitForFunction(() => {
    const e = document.getElementById('events');
    return e.dataset.rendered === e.dataset.received;
  });
  const ev = page.locator('#events');
  res.run = run;
  res.rendered = Number(await ev.getAttribute('data-rendered'));
  res.received = Number(await ev.getAttribute('data-received'));
  res.text = await page.locator('#events li[data-type="model_text"] pre').allTextContents();
  res.types = (await events(page)).map((e) => e.type);
  await page.screenshot({ path: `${shots}/console-stream.png` });
  return res;
}
