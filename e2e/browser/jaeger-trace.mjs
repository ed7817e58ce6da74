// Driver of docs/observability/jaeger-screenshot.sh (a docs tool, not a
// test): opens one trace in Jaeger's UI in headless Chromium
// (playwright-core, Debian's chromium) and saves two screenshots of it:
//
//   OUTDIR/jaeger-refund-trace.png      the span tree, with the first
//                                       invoke_agent span's events (the
//                                       pause) opened
//   OUTDIR/jaeger-refund-tool-span.png  the span tree, with the
//                                       execute_tool span of TOOL opened:
//                                       its attributes and events
//
//   node jaeger-trace.mjs JAEGER_URL TRACE_ID OUTDIR [TOOL] [CHROMIUM] [TIMEOUT_MS]
//
// Prints one JSON line {spans: [operation names in the order shown]} and
// exits 0; on failure prints the reason (and still tries a screenshot of
// the page, OUTDIR/jaeger-failure.png) and exits 1.
import { chromium } from 'playwright-core';

const [base, traceID, outDir, tool = 'refund_order', executablePath = '/usr/bin/chromium', timeoutArg = '60000'] =
  process.argv.slice(2);
if (!base || !traceID || !outDir) {
  console.error('usage: node jaeger-trace.mjs JAEGER_URL TRACE_ID OUTDIR [TOOL] [CHROMIUM] [TIMEOUT_MS]');
  process.exit(2);
}
const timeout = Number(timeoutArg);
const width = 1400;

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const consoleLines = [];
let code = 0;
let page;

// openSpan opens the details of the first span whose operation is name,
// then expands its attributes ("Tags") and each of its events ("Logs").
async function openSpan(name) {
  await page.locator('.span-row a.span-name', { hasText: name }).first().click();
  const detail = page.locator('.detail-row').first();
  await detail.waitFor({ timeout });
  const tags = detail.locator('.AccordianKeyValues--header', { hasText: 'Tags' });
  if ((await tags.count()) > 0 && (await tags.first().getAttribute('aria-checked')) !== 'true') {
    await tags.first().click();
  }
  // Each event is a collapsed row of its own under "Logs (n)".
  const events = detail.locator('.AccordianLogs--content .AccordianKeyValues--header');
  for (let i = 0; i < (await events.count()); i++) {
    if ((await events.nth(i).getAttribute('aria-checked')) !== 'true') await events.nth(i).click();
  }
}

// closeSpan closes the open details of the span whose operation is name.
async function closeSpan(name) {
  await page.locator('.span-row a.span-name', { hasText: name }).first().click();
  await page.locator('.detail-row').first().waitFor({ state: 'detached', timeout });
}

// shoot saves the part of the page that holds the trace, without the
// empty space below it.
async function shoot(file) {
  await page.waitForTimeout(300); // let the row heights settle
  const bottom = await page.evaluate(() => {
    let b = 0;
    for (const el of document.querySelectorAll('.span-row, .detail-row')) {
      b = Math.max(b, el.getBoundingClientRect().bottom + window.scrollY);
    }
    return Math.ceil(b);
  });
  await page.screenshot({ path: `${outDir}/${file}`, fullPage: true, clip: { x: 0, y: 0, width, height: bottom + 8 } });
}

try {
  // Tall enough for the virtualised span list to draw every row.
  page = await browser.newPage({ viewport: { width, height: 2400 } });
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  await page.goto(`${base}/trace/${traceID}`, { waitUntil: 'networkidle', timeout });
  await page.waitForSelector('.span-row', { timeout });
  const spans = await page.$$eval('.span-row .endpoint-name', (els) => els.map((e) => e.textContent.trim()));

  await openSpan('invoke_agent');
  await shoot('jaeger-refund-trace.png');
  await closeSpan('invoke_agent');

  await openSpan(`execute_tool ${tool}`);
  await shoot('jaeger-refund-tool-span.png');

  console.log(JSON.stringify({ spans }));
} catch (e) {
  code = 1;
  console.error(`browser: ${e.stack || e}`);
  console.error(consoleLines.join('\n'));
  if (page) await page.screenshot({ path: `${outDir}/jaeger-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
process.exit(code);
