// Drives a real VS Code (code-server, in Debian's Chromium through playwright-core) through
// the wright extension's commands, as a user would. SCENARIO `auto`: open a file, select two
// lines, run "Wright: Run Agent Task" from the command palette, watch the edit land unsaved and
// the agent's events in the "Wright" output channel, "Wright: Undo Last Agent Run", change a
// setting in the settings editor ("Wright: Show Status" reports it), start a run the model
// stalls and "Wright: Cancel" it, list both in "Wright: Show Sessions", and "Wright: Rebuild
// Index". SCENARIO `review` (the user set `wright.applyMode` to review): the run opens a diff
// of the buffer against the proposal and "Wright: Accept Edits" applies it; a second run's
// proposal is dropped by "Wright: Reject Edits". SCENARIO `approval`: the agent's command
// needs the network, "Allow" in the modal prompt; then a run the provider refuses leaves the
// status bar item in its error state. SCENARIO `chat`: "Wright: Open Chat", a task typed in the
// chat view with an `@` completion (Enter sends), the answer streaming in, a follow-up, a message
// sent while the turn's command runs (it joins that turn), plan mode then code mode in review,
// one hunk of the proposal accepted and the other rejected through the diff editor's CodeLens,
// an approval answered on its card in the conversation, and Stop on a turn the model stalls;
// screenshots of the view at each point go to ARTIFACTS. SCENARIO `firstByte` (for `cargo xtask
// bench chat`): TURNS follow-ups, each answer's `MARK-k` stamped as it lands in the view's page.
//
// Started by tests/tests/vscode.rs, which owns code-server, the scripted model provider and
// every assertion about them. This script only acts and observes: it prints one JSON document
// of what it saw on stdout (the Rust test judges it) and exits non-zero, with the reason on
// stderr, when the workbench never reached a state it waits for. Every wait polls a condition
// with a deadline; nothing sleeps a fixed time.
//
// Environment: PLAYWRIGHT_CORE (the package folder), CHROMIUM (the executable), PROFILE (a
// fresh browser profile folder), URL (the workbench with ?folder=), SCENARIO, FILE (the file to
// open, by name), TASK, EXPECT_EDITED and EXPECT_RESTORED (text the editor must show after the
// run and after the undo), SELECT (`FIRST-LAST`: lines to select before the task), SECOND_TASK
// (the scenario's second run: the one cancelled, rejected or refused), EXPECT_REJECTED (text of
// the rejected proposal), SETTINGS_FILE, SCREENSHOT, TIMEOUT_MS (each wait's deadline), ARTIFACTS
// (the folder for the chat scenario's screenshots), CHAT_* (the chat scenario's messages).

"use strict";

const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const TIMEOUT = Number(process.env.TIMEOUT_MS || 60000);
const POLL_MS = 100;

/** Polls `probe` until it returns a truthy value; throws with `what` at the deadline. */
async function until(what, probe, timeout = TIMEOUT, interval = POLL_MS) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await probe();
      if (last) {
        return last;
      }
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${last})`);
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/**
 * Records, in the page, every text the status bar's wright item and the notifications show:
 * `status` and `notifications` once each, `statusTrail` every change of the item in order (a
 * second run shows the texts the first one did).
 */
function observe() {
  const seen = { status: [], notifications: [], statusTrail: [] };
  window.__wrightSeen = seen;
  const clean = (text) => (text || "").replace(/\s+/g, " ").trim();
  const add = (list, text) => {
    if (clean(text) && !list.includes(clean(text))) {
      list.push(clean(text));
    }
  };
  const record = () => {
    for (const item of document.querySelectorAll(".statusbar-item")) {
      if (/wright:/i.test(item.textContent || "")) {
        add(seen.status, item.textContent);
        const text = clean(item.textContent);
        if (seen.statusTrail[seen.statusTrail.length - 1] !== text) {
          seen.statusTrail.push(text);
        }
      }
    }
    // A toast's "Source: …" and its title are only in the row's accessibility label.
    for (const row of document.querySelectorAll(".notification-toast .monaco-list-row")) {
      add(seen.notifications, row.getAttribute("aria-label"));
      add(seen.notifications, row.innerText);
    }
  };
  new MutationObserver(record).observe(document.body, {
    subtree: true,
    childList: true,
    characterData: true,
    attributes: true,
    attributeFilter: ["aria-label", "class"],
  });
  record();
}

/**
 * The lines Monaco renders under `selector`, in order (spaces are no-break spaces there); empty
 * when nothing matches.
 */
async function monacoText(page, selector) {
  return page.evaluate((selector) => {
    const lines = document.querySelector(selector);
    if (!lines) {
      return "";
    }
    return [...lines.querySelectorAll(".view-line")]
      .map((line) => ({ top: parseFloat(line.style.top || "0"), text: line.textContent || "" }))
      .sort((a, b) => a.top - b.top)
      .map((line) => line.text.replace(/\u00a0/g, " "))
      .join("\n");
  }, selector);
}

/** The text of the active editor. */
function editorText(page) {
  return monacoText(page, ".editor-group-container.active .monaco-editor .view-lines");
}

/** The text of one side (`original` or `modified`) of the active diff editor. */
function diffSide(page, side) {
  return monacoText(page, `.editor-group-container.active .monaco-diff-editor .editor.${side} .view-lines`);
}

/** The lines the output panel shows, one per line. */
function outputText(page) {
  return monacoText(page, ".part.panel .monaco-editor .view-lines");
}

/**
 * Shows the output channel `name` in the panel, through "Output: Show Output Channels..."; the
 * caller polls the panel for text only that channel holds.
 */
async function showChannel(page, name) {
  await runCommand(page, "Output: Show Output Channels...");
  await pickExactly(page, name);
  await page.locator(".part.panel .monaco-editor").first().waitFor({ state: "visible", timeout: TIMEOUT });
}

/** The labels of the quick pick's rows, as the accessibility tree reads them. */
async function quickPickRows(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll(".quick-input-widget .quick-input-list .monaco-list-row")]
      .filter((row) => row.offsetParent !== null)
      .map((row) => (row.getAttribute("aria-label") || row.textContent || "").replace(/\s+/g, " ").trim()),
  );
}

/** Picks the open quick pick's row whose label is exactly `label` (not one it begins). */
async function pickExactly(page, label) {
  const input = page.locator(".quick-input-widget input.input");
  await input.waitFor({ state: "visible", timeout: TIMEOUT });
  await input.fill(label);
  const rows = ".quick-input-widget .quick-input-list .monaco-list-row";
  const position = await until(`the quick pick to offer "${label}"`, () =>
    page.evaluate(
      ({ rows, label }) =>
        [...document.querySelectorAll(rows)].findIndex(
          (row) => (row.querySelector(".label-name")?.textContent || "").trim() === label,
        ) + 1,
      { rows, label },
    ),
  );
  await page.locator(rows).nth(position - 1).click({ timeout: TIMEOUT });
}

/** Selects lines FIRST to LAST of the active editor, whole (quick open's `:LINE` goes there). */
async function selectLines(page, first, last) {
  await page.keyboard.press("Control+P");
  const quickOpen = page.locator(".quick-input-widget input.input");
  await quickOpen.waitFor({ state: "visible", timeout: TIMEOUT });
  await quickOpen.fill(`:${first}`);
  await page.keyboard.press("Enter");
  await until("quick open to close", async () => !(await quickOpen.isVisible()));
  await page.keyboard.press("Home");
  for (let line = first; line < last; line++) {
    await page.keyboard.press("Shift+ArrowDown");
  }
  await page.keyboard.press("Shift+End");
  // The editor's own account of the selection, from its status bar item ("Ln 4, Col 36 (57
  // selected)").
  return until("the selection in the status bar", () =>
    page.evaluate(() =>
      [...document.querySelectorAll(".statusbar-item")]
        .map((item) => item.textContent || "")
        .find((text) => /selected/.test(text)),
    ),
  );
}

/** Opens a file by name through quick open (Ctrl+P). */
async function openFile(page, name) {
  await page.keyboard.press("Control+P");
  const quickOpen = page.locator(".quick-input-widget input.input");
  await quickOpen.waitFor({ state: "visible", timeout: TIMEOUT });
  await quickOpen.fill(name);
  await until(`quick open to offer ${name}`, async () => {
    const labels = await page.locator(".quick-input-list .monaco-list-row").allTextContents();
    return labels.some((label) => label.includes(name));
  });
  await page.keyboard.press("Enter");
}

/** "Wright: Run Agent Task" with `task` typed into its input box. */
async function runTask(page, task) {
  await runCommand(page, "Wright: Run Agent Task");
  await until("the task input box", async () =>
    (await page.locator(".quick-input-widget .quick-input-title").textContent().catch(() => "")).includes(
      "Wright: Run Agent Task",
    ),
  );
  await page.locator(".quick-input-widget input.input").fill(task);
  await page.keyboard.press("Enter");
}

/** Where the status bar item's trail is now: `runEnded` looks only at what comes after. */
async function statusMark(page) {
  return page.evaluate(() => window.__wrightSeen.statusTrail.length);
}

/**
 * Waits until the status bar item, having changed since `mark`, says `end` (idle, unless told
 * otherwise): the run is over. Idle is where a run starts from too, so ending idle counts only
 * after a step was shown; any other end proves the run by itself. A run that fails at its first
 * model call can go from step 1 to error within one frame, so its step may never be rendered.
 */
async function runEnded(page, mark, end = "wright: idle") {
  await until(`the status bar to show "${end}" after the run`, () =>
    page.evaluate(
      ({ mark, end }) => {
        const trail = window.__wrightSeen.statusTrail.slice(mark);
        if (trail.length === 0 || !trail[trail.length - 1].includes(end)) {
          return false;
        }
        return end !== "wright: idle" || trail.some((text) => /wright: step \d/.test(text));
      },
      { mark, end },
    ),
  );
}

/**
 * Whether the active tab shows unsaved changes: waited for a few seconds, since the tab's
 * marker may be drawn a frame after the text it follows.
 */
async function activeTabDirty(page) {
  return until(
    "the active tab to show unsaved changes",
    () => page.evaluate(() => !!document.querySelector(".editor-group-container.active .tab.active.dirty")),
    5000,
  ).catch(() => false);
}

/** Waits until a notification says `text`. */
async function notified(page, text) {
  return until(`a notification saying "${text}"`, () =>
    page.evaluate((text) => window.__wrightSeen.notifications.find((seen) => seen.includes(text)), text),
  );
}

/** Clicks the file's own tab (quick open would offer a diff of it first, as recently used). */
async function fileTab(page) {
  const name = new RegExp(`^\\s*${process.env.FILE.replace(".", "\\.")}\\s*$`);
  await page.locator(".tab").filter({ hasText: name }).first().click({ timeout: TIMEOUT });
}

/** The text of the active editor once it is the file itself (no diff) and `accept` says so. */
async function fileText(page, what, accept) {
  return until(what, async () => {
    const text = await editorText(page);
    const diff = await page.evaluate(
      () => !!document.querySelector(".editor-group-container.active .monaco-diff-editor"),
    );
    return !diff && accept(text) ? text : "";
  });
}

/** Runs a command from the F1 palette by its title. */
async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input.input");
  await input.waitFor({ state: "visible", timeout: TIMEOUT });
  await input.fill(`>${title}`);
  await until(`the palette to offer "${title}"`, async () => {
    const labels = await page.locator(".quick-input-list .monaco-list-row").allTextContents();
    return labels.some((label) => label.includes(title));
  });
  await page.keyboard.press("Enter");
}

/** The chat view's page: the webview frame whose document holds the prompt box. */
async function chatFrame(page) {
  return until("the chat view's page", async () => {
    for (const frame of page.frames()) {
      if (await frame.evaluate(() => !!document.getElementById("prompt")).catch(() => false)) {
        return frame;
      }
    }
    return null;
  });
}

/** The chat view's conversation as text, and its HTML (for the rendered markdown). */
function chatLog(frame) {
  return frame.evaluate(() => {
    const log = document.getElementById("log");
    return { text: log.innerText, html: log.innerHTML };
  });
}

/** Waits until the conversation's text matches `pattern`; returns that text. */
async function chatShows(frame, what, pattern) {
  return until(what, async () => {
    const { text } = await chatLog(frame);
    return pattern.test(text) ? text : "";
  });
}

/** Types `message` into the chat's prompt box and sends it with Enter. */
async function chatSend(frame, message) {
  const prompt = frame.locator("#prompt");
  await prompt.fill(message);
  await prompt.press("Enter");
  await until("the prompt box to empty", async () => (await prompt.inputValue()) === "");
}

/** A screenshot of the window under ARTIFACTS. */
async function snapshot(page, name) {
  if (process.env.ARTIFACTS) {
    await page.screenshot({ path: require("path").join(process.env.ARTIFACTS, `${name}.png`) });
  }
}

/** The CodeLens links the active diff editor shows on its proposal's side. */
function diffLenses(page) {
  return page.locator(".editor-group-container.active .monaco-diff-editor .editor.modified .codelens-decoration a");
}

async function chatScenario(page, result) {
  await runCommand(page, "Wright: Open Chat");
  const frame = await chatFrame(page);
  const prompt = frame.locator("#prompt");
  await until("the prompt box to take the focus", () => frame.evaluate(() => document.activeElement?.id === "prompt"));
  // The task, typed and sent with Enter; the answer streams in.
  await page.keyboard.type(process.env.CHAT_TASK);
  await page.keyboard.press("Enter");
  result.firstAnswer = await chatShows(frame, "the first turn's end", /turn 1 done/);
  result.firstAnswerHtml = (await chatLog(frame)).html;
  await snapshot(page, "1-answer");

  // A follow-up, with a file mention completed from the `@` list: the next turn.
  await prompt.focus();
  await page.keyboard.type(process.env.CHAT_FOLLOW_UP_START);
  result.completions = await until("the @ completions", async () => {
    const rows = await frame.locator("#completions li").allTextContents();
    return rows.some((row) => row.includes("src/lib.rs")) ? rows : null;
  });
  await until("src/lib.rs to be the first completion", async () =>
    ((await frame.locator("#completions li").first().textContent()) || "").includes("src/lib.rs"),
  );
  await page.keyboard.press("Tab");
  await page.keyboard.type(process.env.CHAT_FOLLOW_UP_END);
  result.completedFollowUp = await prompt.inputValue();
  await page.keyboard.press("Enter");
  await chatShows(frame, "the second turn's end", /turn 2 done/);

  // A message while the turn's command runs: it joins the turn.
  await chatSend(frame, process.env.CHAT_SLOW);
  await until("the running command's card", async () =>
    (await frame.locator(".card.tool:not([data-done])").count()) > 0,
  );
  await chatSend(frame, process.env.CHAT_STEER);
  result.steered = await chatShows(frame, "the steering message in the conversation", /joined turn 3/);
  await chatShows(frame, "the third turn's end", /turn 3 done/);
  await frame.locator(".card.tool summary").last().click();
  result.toolCard = await frame.locator(".card.tool").last().innerText();
  await snapshot(page, "2-steered");

  // Plan mode, then code mode in review.
  await frame.locator("#mode").selectOption("plan");
  await chatSend(frame, process.env.CHAT_PLAN);
  result.plan = await chatShows(frame, "the plan turn's end", /turn 4 done/);
  await snapshot(page, "3-plan");
  await frame.locator("#mode").selectOption("code");
  await frame.locator("#apply").selectOption("review");
  await chatSend(frame, process.env.CHAT_CODE);
  await until("the proposal's card with two hunks", async () => (await frame.locator(".card.proposal .hunk").count()) === 2);
  await chatShows(frame, "the code turn's end", /turn 5 done/);
  await snapshot(page, "4-proposal");

  // The diff: accept the first hunk, reject the other, each from its CodeLens.
  await until("the proposal's diff editor with a CodeLens per hunk", async () =>
    (await diffLenses(page).filter({ hasText: "Accept Hunk" }).count()) === 2,
  );
  result.lensesBefore = await diffLenses(page).allTextContents();
  await diffLenses(page).filter({ hasText: "Accept Hunk" }).first().click();
  result.bufferAfterAccept = await until("the accepted hunk in the buffer's side", async () => {
    const text = await diffSide(page, "original");
    return text.includes(process.env.EXPECT_EDITED) ? text : "";
  });
  await until("one hunk left in the diff", async () =>
    (await diffLenses(page).filter({ hasText: "Accept Hunk" }).count()) === 1,
  );
  await snapshot(page, "5-diff-one-left");
  await diffLenses(page).filter({ hasText: "Reject Hunk" }).first().click();
  await until("no hunk left in the diff", async () => (await diffLenses(page).count()) === 0);
  result.proposalCard = await until("the chat's card to say the hunk was rejected", async () => {
    const text = await frame.locator(".card.proposal").last().innerText();
    return /rejected/.test(text) ? text : "";
  });
  await fileTab(page);
  result.afterHunks = await fileText(page, "the file after the hunks", (text) =>
    text.includes(process.env.EXPECT_EDITED),
  );

  // A command the sandbox refused the network: the chat asks inline, Allow runs it again.
  await chatSend(frame, process.env.CHAT_NETWORK);
  result.approvalCard = await until("the approval's card", async () => {
    const cards = frame.locator(".card.approval");
    return (await cards.count()) > 0 ? await cards.last().innerText() : "";
  });
  result.approvalFocused = await frame.evaluate(() => document.activeElement?.dataset?.decision ?? "");
  await snapshot(page, "6-approval");
  // The card took the focus (the prompt box was empty): Enter answers "Allow".
  await page.keyboard.press("Enter");
  result.approvalAnswered = await until("the card to say it was allowed", async () => {
    const text = await frame.locator(".card.approval").last().innerText();
    return /allowed/.test(text) ? text : "";
  });
  await chatShows(frame, "the network turn's end", /turn 6 done/);

  // The next turn, stopped while the model stalls.
  await chatSend(frame, process.env.CHAT_LAST);
  await chatShows(frame, "the last turn's first words", /Because/);
  await frame.locator("#stop").click();
  result.stopped = await chatShows(frame, "the stopped turn", /turn 7 cancelled/);
  result.sessionsPicker = await frame.locator("#session").innerText();
  await snapshot(page, "7-stopped");

  // "Wright: Show Stats": the journals' counts as a card in the view, with a bar per day.
  await runCommand(page, "Wright: Show Stats");
  result.statsCard = await until("the stats card", async () => {
    const card = frame.locator("#stats");
    const text = (await card.count()) > 0 ? await card.innerText() : "";
    return /All: /.test(text) ? text : "";
  });
  result.statsBars = await frame.locator("#stats svg.stats-chart rect title").allTextContents();
  await snapshot(page, "8-stats");
}

/**
 * For `cargo xtask bench chat`: a task, then TURNS follow-ups from the chat view; the wall time
 * at which the conversation first holds each answer's `MARK-k` (stamped by a MutationObserver in
 * the view's page, as the text lands in the DOM) goes to `result.stamps`.
 */
async function firstByteScenario(page, result) {
  await runCommand(page, "Wright: Open Chat");
  const frame = await chatFrame(page);
  await chatSend(frame, process.env.CHAT_TASK);
  await chatShows(frame, "the first turn's end", /turn 1 done/);
  await frame.evaluate(() => {
    const stamps = {};
    window.__wrightStamps = stamps;
    const log = document.getElementById("log");
    new MutationObserver(() => {
      const now = performance.timeOrigin + performance.now();
      for (const match of log.textContent.matchAll(/MARK-(\d+)/g)) {
        if (!(match[1] in stamps)) {
          stamps[match[1]] = now;
        }
      }
    }).observe(log, { childList: true, subtree: true, characterData: true });
  });
  const turns = Number(process.env.TURNS);
  for (let k = 1; k <= turns; k++) {
    await chatSend(frame, `follow-up ${k}`);
    await chatShows(frame, `turn ${k + 1}'s end`, new RegExp(`turn ${k + 1} done`));
  }
  result.stamps = await frame.evaluate(() => window.__wrightStamps);
}

async function main() {
  const context = await chromium.launchPersistentContext(process.env.PROFILE, {
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1400, height: 900 },
  });
  const result = {};
  const page = context.pages()[0] || (await context.newPage());
  try {
    // code-server answers once it listens; until then the navigation fails.
    await until("code-server to answer", async () => {
      const response = await page.goto(process.env.URL, { timeout: 5000 }).catch(() => null);
      return response && response.ok();
    });
    await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: TIMEOUT });
    await page.evaluate(observe);

    // The extension's item says idle once `wright lsp` answered `initialize`.
    await until("the status bar to show wright idle", () =>
      page.evaluate(() => window.__wrightSeen.status.some((text) => text.includes("wright: idle"))),
    );

    await openFile(page, process.env.FILE);
    result.before = await until("the file in the editor", async () => {
      const text = await editorText(page);
      return text.includes(process.env.EXPECT_RESTORED) ? text : "";
    });

    if (process.env.SCENARIO === "chat") {
      await chatScenario(page, result);
    } else if (process.env.SCENARIO === "firstByte") {
      await firstByteScenario(page, result);
    } else if (process.env.SCENARIO === "approval") {
      // The model's command needs the network: the extension asks with a modal dialog.
      let mark = await statusMark(page);
      await runTask(page, process.env.TASK);
      const dialog = page.locator(".monaco-dialog-box");
      result.approvalDialog = await until("the approval dialog", async () =>
        (await dialog.isVisible()) ? await dialog.innerText() : "",
      );
      await dialog.getByRole("button", { name: "Allow", exact: true }).click({ timeout: TIMEOUT });
      await runEnded(page, mark);
      // A run the provider refuses: the item turns to its error state, and says why.
      mark = await statusMark(page);
      await runTask(page, process.env.SECOND_TASK);
      await runEnded(page, mark, "wright: error");
      result.failureNotice = await notified(page, "the run failed");
      result.errorItem = await page.evaluate(() => {
        const item = [...document.querySelectorAll(".statusbar-item")].find((item) =>
          (item.textContent || "").includes("wright: error"),
        );
        return item ? item.getAttribute("aria-label") || item.textContent : "";
      });
    } else if (process.env.SCENARIO === "review") {
      let mark = await statusMark(page);
      await runTask(page, process.env.TASK);
      // The proposal opens as a diff: the buffer on the left, the proposal on the right.
      result.diffTitle = await until("the proposal's diff editor", async () => {
        const tabs = await page.locator(".editor-group-container.active .tab").allTextContents();
        return tabs.find((tab) => tab.includes("Wright's proposal")) || "";
      });
      result.proposal = await until("the proposal in the diff", async () => {
        const text = await diffSide(page, "modified");
        return text.includes(process.env.EXPECT_EDITED) ? text : "";
      });
      result.bufferInDiff = await until("the buffer's side of the diff", () => diffSide(page, "original"));
      await runEnded(page, mark);
      await runCommand(page, "Wright: Accept Edits");
      await fileTab(page);
      result.afterAccept = await fileText(page, "the accepted edit in the editor", (text) =>
        text.includes(process.env.EXPECT_EDITED),
      );
      result.dirtyAfterAccept = await activeTabDirty(page);
      // A second proposal, rejected: the buffer keeps the accepted text.
      mark = await statusMark(page);
      await runTask(page, process.env.SECOND_TASK);
      result.secondProposal = await until("the second proposal in a diff", async () => {
        const text = await diffSide(page, "modified");
        return text.includes(process.env.EXPECT_REJECTED) ? text : "";
      });
      await runEnded(page, mark);
      await runCommand(page, "Wright: Reject Edits");
      result.rejectNotice = await notified(page, "dropped the edits");
      await fileTab(page);
      result.afterReject = await fileText(page, "the file after the rejection", (text) =>
        text.includes(process.env.EXPECT_EDITED),
      );
    } else {
      const [first, last] = process.env.SELECT.split("-").map(Number);
      result.selection = await selectLines(page, first, last);
      const mark = await statusMark(page);
      await runTask(page, process.env.TASK);
      result.afterRun = await until("the agent's edit in the editor", async () => {
        const text = await editorText(page);
        return text.includes(process.env.EXPECT_EDITED) ? text : "";
      });
      result.dirtyAfterRun = await activeTabDirty(page);
      await runEnded(page, mark);
      // The run's events, as the "Wright" output channel shows them (the panel maximized, so
      // that every line of the run is rendered).
      await showChannel(page, "Wright");
      await runCommand(page, "View: Toggle Maximized Panel");
      result.channelAfterRun = await until("the run's outcome in the Wright channel", async () => {
        const text = await outputText(page);
        return /done after \d+ steps/.test(text) ? text : "";
      });
      await runCommand(page, "View: Toggle Maximized Panel");
      await fileTab(page);
      await runCommand(page, "Wright: Undo Last Agent Run");
      result.afterUndo = await until("the undo in the editor", async () => {
        const text = await editorText(page);
        return !text.includes(process.env.EXPECT_EDITED) && text.includes(process.env.EXPECT_RESTORED)
          ? text
          : "";
      });
      // A setting changed in the settings editor reaches the running server
      // (workspace/didChangeConfiguration). code-server does not notice the file changing
      // behind its back, so the change is made as a user makes it: edit, save.
      const fs = require("fs");
      await runCommand(page, "Preferences: Open User Settings (JSON)");
      // The focused editor (the test turns VS Code 1.139's modal editors off).
      await until("the settings editor", () =>
        page.evaluate(() =>
          (document.querySelector(".monaco-editor.focused .view-lines")?.textContent || "").includes("files.autoSave"),
        ),
      );
      // Typed as a user types it, after the opening brace (the editor closes quotes itself
      // and types over them).
      await page.keyboard.press("Control+Home");
      await page.keyboard.press("End");
      await page.keyboard.press("Enter");
      await page.keyboard.type('"wright.sandboxNetwork": "deny",');
      await page.keyboard.press("Control+S");
      await until("the settings to be saved", () =>
        JSON.parse(fs.readFileSync(process.env.SETTINGS_FILE, "utf8"))["wright.sandboxNetwork"] === "deny",
      );
      result.statusAfterSettingChange = await until(
        "Wright: Show Status to report the changed setting",
        async () => {
          await runCommand(page, "Wright: Show Status");
          const text = await outputText(page);
          return /sandbox\.network = deny\s+\[workspace\/didChangeConfiguration\]/.test(text) ? text : "";
        },
        TIMEOUT,
        1000,
      );
      // A run the model stalls in the middle of its answer, cancelled. Its first words in the
      // channel (still in the panel from Show Status) prove the request is streaming: the
      // cancel interrupts a running stream, not a step not yet sent.
      await fileTab(page);
      const runMark = await statusMark(page);
      await runTask(page, process.env.SECOND_TASK);
      await until("the stalled run's first words in the Wright channel", async () =>
        /\] Thinking/.test(await outputText(page)),
      );
      // The channel and the status bar are updated by separate messages: the step may show a
      // moment after the first words.
      result.statusWhileStalled = await until("the stalled run's step in the status bar", () =>
        page.evaluate((mark) => {
          const trail = window.__wrightSeen.statusTrail.slice(mark);
          return trail.some((text) => /wright: step \d/.test(text)) ? trail : null;
        }, runMark),
      );
      await runCommand(page, "Wright: Cancel");
      await runEnded(page, runMark);
      result.channelAfterCancel = await until("the cancellation in the Wright channel", async () => {
        const text = await outputText(page);
        return /cancelled after \d+ steps/.test(text) ? text : "";
      });
      // Both sessions, newest first.
      await runCommand(page, "Wright: Show Sessions");
      result.sessions = await until("the sessions in a quick pick", async () => {
        const rows = await quickPickRows(page);
        return rows.length >= 2 ? rows : null;
      });
      await page.keyboard.press("Escape");
      // The index re-read: the server logs the (incremental) rebuild in its own channel.
      await runCommand(page, "Wright: Rebuild Index");
      await showChannel(page, "Wright Server");
      result.serverChannelAfterRebuild = await until("the rebuilt index in the Wright Server channel", async () => {
        const text = await outputText(page);
        return /indexed .*\(incremental\)/.test(text) ? text : "";
      });
    }
  } catch (err) {
    result.error = String(err && err.stack ? err.stack : err);
    // What the window showed, for the failure's report.
    result.statusBar = await page
      .evaluate(() => [...document.querySelectorAll(".statusbar-item")].map((item) => item.textContent))
      .catch(() => null);
    if (process.env.SCREENSHOT) {
      await page.screenshot({ path: process.env.SCREENSHOT }).catch(() => undefined);
    }
  } finally {
    result.seen = await page.evaluate(() => window.__wrightSeen).catch(() => null);
    await context.close().catch(() => undefined);
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
  if (result.error) {
    process.stderr.write(`${result.error}\n`);
    process.exit(1);
  }
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
