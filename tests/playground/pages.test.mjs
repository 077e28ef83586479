// The playground's pages in a real browser: Debian's Chromium, driven over
// the DevTools protocol by playwright-core (which downloads nothing).
//
//   node pages.test.mjs --pages DIR --shots DIR --bin DIR
//
// --pages holds the built pages (.build/playground), --bin the exercises'
// programs (ml_scratch0N[a]_solution and _starter), whose --step=json runs
// are replayed on the pages. Prints a line per check; exits 1 if any
// failed.
import { execFileSync } from "node:child_process";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { check, chromium, flags, verdict } from "./browser.mjs";

const args = flags("pages.test.mjs", ["pages", "shots", "bin"]);
const browser = await chromium("pages.test.mjs");
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));
mkdirSync(args.shots, { recursive: true });

async function open(name) {
  const file = join(args.pages, name + ".html");
  const bytes = statSync(file).size;
  const started = Date.now();
  await page.goto(pathToFileURL(file).href);
  if (name !== "index")
    await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  const ms = Date.now() - started;
  console.log(`     ${name}.html: ${(bytes / 1024).toFixed(0)} KiB, ready in ${ms} ms`);
  check(bytes < 2 * 1024 * 1024, `${name}.html is under 2 MB`);
  return ms;
}

async function shot(name) {
  await page.screenshot({ path: join(args.shots, name + ".png"), fullPage: true });
}

// Every control has a name a screen reader can say.
async function labelled(name) {
  const unnamed = await page.$$eval("input, select, button", (els) =>
    els.filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") &&
                      !(e.tagName === "BUTTON" && e.textContent.trim())).map((e) => e.id));
  check(unnamed.length === 0, `${name}: every control is labelled ${unnamed.join(" ")}`);
}

const numbers = (cells) => cells.map((c) => Number(c.textContent));
const rows = () => page.$$eval("#buffers tr[data-rank]", (trs) =>
  trs.map((tr) => Array.from(tr.querySelectorAll("td")).map((td) => Number(td.textContent))));

// The index links every page.
await open("index");
const links = await page.$$eval("a", (as) => as.map((a) => a.getAttribute("href")));
check(["ml_scratch01.html", "ml_scratch02.html", "ml_scratch03.html", "ml_scratch04.html"].every((l) => links.includes(l)),
      "the index links the exercises' pages");
await shot("index");

// ml_scratch03: N = 4 stepped to the end against the closed form.
await open("ml_scratch03");
await labelled("ml_scratch03");
await page.fill("#ranks", "4");
await page.fill("#length", "10");
await page.fill("#seed", "7");
await page.click("#reset");
const inputs = await rows();
const sums = inputs[0].map((_, i) => inputs.reduce((s, r) => s + r[i], 0));
const closed = await page.$$eval("#expected td", (tds) => tds.map((td) => Number(td.textContent)));
check(JSON.stringify(sums) === JSON.stringify(closed),
      "the page's closed form is the sum of the inputs it shows");
let steps = 0;
while (!(await page.isDisabled("#step")) && steps < 100) {
  await page.keyboard.press("n");
  steps += 1;
}
check(steps === 6, `N = 4 takes 2(N-1) = 6 steps (took ${steps})`);
const final = await rows();
check(final.length === 4 && final.every((r) => JSON.stringify(r) === JSON.stringify(closed)),
      "after the last step every rank's buffer is the closed form");
const sent = await page.$$eval("#bytes tr", (trs) => trs.slice(1, 5).map((tr) => Number(tr.children[2].textContent)));
// 10 elements in 4 chunks of 3, 3, 2 and 2: the ranks send about
// 2·S·(N-1)/N = 60 bytes each, 2·S·(N-1) = 240 in all.
check(sent.reduce((a, b) => a + b, 0) === 240 && sent.every((b) => Math.abs(b - 60) <= 8),
      `the ranks sent 2·S·(N-1) = 240 bytes, about 60 each (${sent})`);
check(await page.getAttribute("#final", "data-matches") === "1", "the page says every rank holds the sum");
await shot("ml_scratch03");
await page.keyboard.press("r");
check((await page.textContent("#phase-label")).startsWith("Before the first step"), "R resets the ring");
await page.keyboard.press("b");
await page.fill("#ranks", "1");
await page.click("#reset");
check((await page.textContent("#error")).includes("give 2 to 64"),
      "a ring of 1 rank is refused with what to give");

// Native runs of an exercise (--step=json), replayed on its page: the
// reference matches, the untouched starter differs.
// `part` is the exercise's part whose steps the page shows.
async function replays(id, input, said_at, part) {
  for (const [who, want] of [["solution", "1"], ["starter", "0"]]) {
    const jsonl = execFileSync(join(args.bin, `${part}_${who}`), ["--step=json"], { encoding: "utf8" });
    const file = join(args.shots, `${id}_${who}.jsonl`);
    writeFileSync(file, jsonl);
    await page.setInputFiles(input, file);
    await page.waitForSelector(`${said_at}[data-matches="${want}"]`, { timeout: 10000 }).catch(() => {});
    const said = await page.textContent(said_at);
    check(await page.getAttribute(said_at, "data-matches") === want,
          `${id}: the ${who}'s --step=json run replays as ${want === "1" ? "a match" : "a difference"}: ${said}`);
  }
}
await replays("ml_scratch03", "#replay-file", "#replay-verdict", "ml_scratch03a");

// ml_scratch02: async, the staleness fix off then on.
await open("ml_scratch02");
await labelled("ml_scratch02");
const loss = async (fix) => {
  await page.selectOption("#mode", "async");
  await page.fill("#workers", "8");
  await page.fill("#lr", "0.3");
  await page.setChecked("#fix", fix);
  await page.click("#reset");
  await page.fill("#target", "300");
  await page.click("#run-to");
  const st = await page.$("#status");
  return { diverged: await st.getAttribute("data-diverged"),
           loss: Number(await st.getAttribute("data-loss")),
           initial: Number(await st.getAttribute("data-initial-loss")),
           version: Number(await st.getAttribute("data-version")) };
};
const off = await loss(false);
check(off.diverged === "1" && !(off.loss < 100 * off.initial),
      `async without the fix diverges (loss ${off.loss} from ${off.initial})`);
await shot("ml_scratch02_diverged");
const on = await loss(true);
check(on.version === 300 && on.diverged === "0" && on.loss < on.initial / 100,
      `async with the fix falls (loss ${on.loss} from ${on.initial})`);
await shot("ml_scratch02");
await replays("ml_scratch02", "#run-file", "#run-verdict", "ml_scratch02a");
await page.keyboard.press(" ");
await page.waitForTimeout(600);
await page.keyboard.press(" ");
check(Number(await page.getAttribute("#status", "data-version")) > 300, "Space plays and pauses");

// ml_scratch01: sync, a straggler, then a backup worker.
await open("ml_scratch01");
await labelled("ml_scratch01");
const sync = async (backup) => {
  await page.fill("#workers", "4");
  await page.fill("#backup", String(backup));
  await page.$eval("#straggler", (e) => { e.value = "5"; e.dispatchEvent(new Event("input")); });
  await page.click("#reset");
  await page.fill("#target", "50");
  await page.click("#run-to");
  const dropped = Number(await page.textContent('#workers-table tr[data-worker="0"] td:nth-child(5)'));
  const time = Number((await page.textContent("#server tr:nth-child(3) td")).replace(" ms", ""));
  return { dropped, time };
};
const all = await sync(0);
const backup = await sync(1);
check(all.dropped === 0 && backup.dropped > 0, `a backup worker drops the straggler's late gradients (${backup.dropped})`);
check(backup.time < all.time, `and 50 steps take less virtual time (${backup.time} ms against ${all.time} ms)`);
await shot("ml_scratch01");
await replays("ml_scratch01", "#run-file", "#run-verdict", "ml_scratch01a");

// ml_scratch04: buckets during backward, replicas, drift.
await open("ml_scratch04");
await labelled("ml_scratch04");
const ddpRun = async (settings, steps) => {
  await page.setChecked("#overlap", settings.overlap !== false);
  await page.setChecked("#skip", settings.skip === true);
  await page.fill("#rebroadcast", String(settings.rebroadcast || 0));
  await page.click("#reset");
  const losses = [];
  for (let i = 0; i < steps; i++) {
    await page.keyboard.press("n");
    losses.push(Number(await page.getAttribute("#step-label", "data-loss")));
  }
  const at = async (name) => Number(await page.getAttribute("#step-label", name));
  return { losses, drift: await at("data-drift"), took: await at("data-took"),
           serial: await at("data-serial"), backwardEnd: await at("data-backward-end"),
           comm: await page.$$eval('#gantt rect[data-lane="1"]', (rs) => rs.length),
           buckets: await page.$$eval("#buckets tr", (trs) => trs.length - 1) };
};
const plain = await ddpRun({}, 20);
check(plain.drift === 0, "replicas averaged over the ring stay identical (drift 0)");
check(plain.losses[19] < plain.losses[0] / 2, `the replicas learn (loss ${plain.losses[0]} -> ${plain.losses[19]})`);
check(plain.comm === 4 * plain.buckets, `a Gantt row per worker with each bucket's all-reduce (${plain.comm} bars)`);
check(plain.took < 0.9 * plain.serial,
      `all-reduces during backward shorten the step (${plain.took} ms against ${plain.serial} ms)`);
await shot("ml_scratch04");
const serial = await ddpRun({ overlap: false }, 1);
check(Math.abs(serial.took - serial.serial) < 1e-9, "without overlap the all-reduces wait for the backward's end");
const skipped = await ddpRun({ skip: true }, 10);
check(skipped.drift > 0, `a bucket never averaged makes the replicas drift (${skipped.drift})`);
const mended = await ddpRun({ skip: true, rebroadcast: 5 }, 10);
check(mended.drift === 0, "a re-broadcast every 5 steps brings them back together");
await replays("ml_scratch04", "#run-file", "#run-verdict", "ml_scratch04a");

check(errors.length === 0, `no script errors ${errors.join("; ")}`);
await browser.close();
process.exit(verdict());
