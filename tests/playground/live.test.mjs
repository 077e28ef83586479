// The live page of `lumen exercises run ID --browser` in a real browser:
// Debian's Chromium, driven by playwright-core. The learner's untouched
// starter runs first (its messages drawn, the check's FAIL shown); then
// the reference is saved over it, and the page shows the second run and
// its PASS without a reload.
//
//   node live.test.mjs --lumen PATH --exercises DIR --shots DIR
//
// --lumen is the `lumen` program, --exercises the source tree's
// examples/exercises (the reference comes from there). Prints a line per
// check; exits 1 if any failed.
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { check, chromium, flags, verdict } from "./browser.mjs";

const args = flags("live.test.mjs", ["lumen", "exercises", "shots"]);

const dir = mkdtempSync(join(tmpdir(), "lumen-live-"));
mkdirSync(args.shots, { recursive: true });
// The tool, as the learner starts it; this test ends exactly this process.
const tool = spawn(args.lumen, ["exercises", "--dir", dir, "run", "ml_scratch03b", "--browser"],
                   { stdio: ["ignore", "pipe", "inherit"] });
let said = "";
const url = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`no live page within 60 s; it said: ${said}`)), 60000);
  tool.stdout.on("data", (d) => {
    said += d;
    const m = said.match(/Live page: (http:\/\/127\.0\.0\.1:\d+\/)/);
    if (m) { clearTimeout(timer); resolve(m[1]); }
  });
  tool.on("exit", (code) => reject(new Error(`lumen exited (${code}) before serving: ${said}`)));
});
check(true, `the tool serves the live page at ${url}`);

// Hostile bytes on its port: a request past 16 KiB and a line of noise
// are dropped; the page is served as before.
const port = Number(new URL(url).port);
for (const junk of [Buffer.alloc(64 * 1024, 0x41), Buffer.from("\x00\xff\r\n\r\n")]) {
  const closed = await new Promise((resolve) => {
    const s = connect(port, "127.0.0.1", () => s.end(junk));
    s.on("data", () => {});
    s.on("close", () => resolve(true));
    s.on("error", () => resolve(true));
    setTimeout(() => { s.destroy(); resolve(false); }, 5000);
  });
  check(closed, `${junk.length} hostile bytes: the connection is closed`);
}

const browser = await chromium("live.test.mjs");
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  // The starter's run: built, stepped, checked.
  await page.waitForSelector('body[data-runs="1"][data-verdict]', { timeout: 90000 });
  // Its three peers answer at once, having sent nothing.
  const drawn = async () => [Number(await page.getAttribute("body", "data-events")),
                             await page.locator("#sequence line.msg").count(),
                             await page.locator("#sequence line.life").count()];
  let [events, arrows, lifelines] = await drawn();
  check(events >= 10 && arrows >= 4 && lifelines === 4,
        `the starter's run: ${events} events, ${arrows} messages between ${lifelines} nodes`);
  check(await page.getAttribute("body", "data-verdict") === "fail", "the starter's check fails");
  const text = await page.textContent("#check");
  check(text.includes("TODO(ml_scratch03b)"), "the page shows the check's message, naming the TODO");
  check(text.includes("Where your run first leaves the reference's"),
        "and where the run first leaves the reference's");
  // The learner saves the reference's code: a second run, without a reload.
  copyFileSync(join(args.exercises, "ml_scratch03", "03b_solution.cpp"),
               join(dir, "ml_scratch03b", "03b_starter.cpp"));
  await page.waitForSelector('body[data-runs="2"][data-verdict]', { timeout: 90000 });
  check(await page.getAttribute("body", "data-verdict") === "pass", "the saved file's run passes, live");
  check((await page.textContent("#title")).includes("run 2"), "the title counts the runs");
  // The peers' chunks, each step a message to the right neighbour.
  [events, arrows, lifelines] = await drawn();
  check(events > 60 && arrows > 40 && lifelines === 4,
        `the ring's run: ${events} events, ${arrows} messages between ${lifelines} nodes`);
  // An event's state: the chunk its message carries.
  await page.locator("#sequence rect.row").nth(30).dispatchEvent("click");
  const state = await page.textContent("#state");
  check(state.includes("event:") && state.includes("sent: ["),
        `a clicked event shows the exercise's state (${state.slice(0, 80)}...)`);
  await page.screenshot({ path: join(args.shots, "live_ml_scratch03b.png") });
  check(errors.length === 0, `no script errors (${errors.join("; ")})`);
} finally {
  await browser.close();
  tool.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
}
process.exit(verdict());
