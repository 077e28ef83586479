// What the browser tests share: their flags, Debian's Chromium driven by
// playwright-core (which downloads nothing), and their checks.

/// The flags `--name value` of the test `script`; exits 2 naming the first
/// of `needs` that is missing.
export function flags(script, needs) {
  const args = {};
  for (let i = 2; i + 1 < process.argv.length; i += 2)
    args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
  for (const need of needs)
    if (!args[need]) {
      console.error(`${script}: --${need} is missing; see the usage at the top of the file`);
      process.exit(2);
    }
  return args;
}

/// Chromium ($LUMEN_CHROMIUM, or Debian's), started; exits 2 if
/// playwright-core is missing.
export async function chromium(script) {
  let driver;
  try {
    ({ chromium: driver } = await import("playwright-core"));
  } catch {
    console.error(`${script}: playwright-core is not installed; run ` +
                  "`npm ci --prefix tests/playground` (the README's playground command)");
    process.exit(2);
  }
  return driver.launch({
    executablePath: process.env.LUMEN_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

let failures = 0;

/// Prints a check's line; false if it failed.
export function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures += 1;
  return ok;
}

/// The test's exit code: 1 if a check failed.
export function verdict() {
  return failures > 0 ? 1 : 0;
}
