// a2pg dashboard: live refresh of the overview, the live tail of a session, row selection.
// Plain JavaScript, no build step. Store data is only ever set as text (textContent).
"use strict";

function refreshLive(box) {
  const every = Math.max(1, parseFloat(box.dataset.every || "5")) * 1000;
  let busy = false;
  async function tick() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const response = await fetch(box.dataset.live, { credentials: "same-origin" });
      if (response.ok) {
        // The server rendered and escaped this fragment, as it renders whole pages.
        box.innerHTML = await response.text();
        box.classList.remove("stale");
      } else {
        box.classList.add("stale");
      }
    } catch (_) {
      box.classList.add("stale");
    } finally {
      busy = false;
    }
  }
  setInterval(tick, every);
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function tailEntry(e) {
  const item = el("li");
  item.dataset.index = String(e.index);
  const line = el("div", "tail-line");
  line.append(el("span", "tail-index", String(e.index)), el("span", "tail-time", e.created_at),
              el("span", "tail-type", e.type));
  if (e.cause) line.append(el("span", "tail-cause", "← " + e.cause));
  item.append(line);
  if (e.collapsed) {
    const details = el("details", "payload");
    const summary = el("summary");
    summary.append(el("code", "", e.preview));
    details.append(summary, el("pre", "", e.payload));
    item.append(details);
  } else {
    item.append(el("pre", "payload", e.payload));
  }
  return item;
}

const TAIL_KEEP = 500;

function followTail(list) {
  const status = document.getElementById("tail-status");
  const source = new EventSource(list.dataset.stream);
  source.onopen = () => { if (status) status.textContent = "live."; };
  source.onerror = () => { if (status) status.textContent = "reconnecting…"; };
  source.addEventListener("a2event", (message) => {
    const event = JSON.parse(message.data);
    list.append(tailEntry(event));
    while (list.children.length > TAIL_KEEP) list.firstElementChild.remove();
  });
}

// Row selection (a form whose rows' checkboxes name it by their form attribute): a
// "select all" box, and the action buttons disabled while nothing is ticked. Without
// script the boxes still work one by one; the server refuses an empty selection.
function followSelection(form) {
  const boxes = () => document.querySelectorAll(`input[type=checkbox][name=key][form="${form.id}"]`);
  const all = document.querySelector(`input[data-select-all="${form.id}"]`);
  const buttons = form.querySelectorAll("button");
  function update() {
    const ticked = Array.from(boxes()).filter((box) => box.checked).length;
    for (const button of buttons) button.disabled = ticked === 0;
    if (all) {
      all.checked = ticked > 0 && ticked === boxes().length;
      all.indeterminate = ticked > 0 && ticked < boxes().length;
    }
  }
  for (const box of boxes()) box.addEventListener("change", update);
  if (all) {
    all.hidden = false;
    all.addEventListener("change", () => {
      for (const box of boxes()) box.checked = all.checked;
      update();
    });
  }
  update();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const box of document.querySelectorAll("[data-live]")) refreshLive(box);
  for (const list of document.querySelectorAll("ol[data-stream]")) followTail(list);
  for (const form of document.querySelectorAll("form[data-selection]")) followSelection(form);
});
