// Driver of e2e/browser_test.go: opens the demo store in headless Chromium
// (playwright-core, Debian's chromium), waits until the server-side
// scripted agent has placed the order through the page's UIAP actions, and
// saves a screenshot of the final page.
//
//   node demo.mjs URL SCREENSHOT [CHROMIUM] [TIMEOUT_MS]
//
// Prints one JSON line {order, cart, status, log, console} and exits 0 on
// success; on failure prints the reason (and still tries the screenshot)
// and exits 1.
import { chromium } from 'playwright-core';

const [url, shot, executablePath = '/usr/bin/chromium', timeoutArg = '60000'] = process.argv.slice(2);
if (!url || !shot) {
  console.error('usage: node demo.mjs URL SCREENSHOT [CHROMIUM] [TIMEOUT_MS]');
  process.exit(2);
}
const timeout = Number(timeoutArg);

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const consoleLines = [];
let code = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  await page.goto(url, { waitUntil: 'load', timeout });
  try {
    await page.waitForFunction(
      () => document.getElementById('order')?.dataset.state === 'placed' && document.body.dataset.session === 'TERMINATED',
      null,
      { timeout },
    );
  } catch (e) {
    code = 1;
    console.error(`the order was not placed and the session ended within ${timeout} ms: ${e.message}`);
  }
  await page.waitForTimeout(700); // let the page's action highlights fade
  const state = await page.evaluate(() => ({
    order: document.getElementById('order').textContent,
    cart: [...document.querySelectorAll('#cart li')].map((li) => li.textContent),
    status: document.getElementById('status').textContent,
    log: document.getElementById('log').textContent.trim().split('\n'),
  }));
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ ...state, console: consoleLines }));
} catch (e) {
  code = 1;
  console.error(`browser: ${e.stack || e}`);
  console.error(consoleLines.join('\n'));
} finally {
  await browser.close();
}
process.exit(code);
