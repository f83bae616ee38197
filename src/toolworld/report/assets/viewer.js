/* Trajectory viewer: reads the JSON embedded in #report-data and renders the episode list and one episode.
   Every piece of data is inserted as text (createTextNode / textContent), never as markup: it was written by
   a model, a user simulator or a tool and may contain HTML. The script logs nothing when all goes well. */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("report-data").textContent);
  var tasks = data.tasks || {};
  var rows = data.rows || [];
  var systems = data.systems || [];
  var listBody = document.getElementById("trial-rows");
  var detail = document.getElementById("trial-detail");
  var failedBox = document.getElementById("filter-failed");
  var toolSelect = document.getElementById("filter-tool");
  var textBox = document.getElementById("filter-text");
  var countLabel = document.getElementById("filter-count");
  var rowNodes = [];
  var selected = -1;

  var MARK = { pass: "\u2713", fail: "\u2717", infra: "!", unscored: "\u2013" };
  var OPS = { inserted: "+ insert", updated: "~ update", deleted: "\u2212 delete" };

  // -- small DOM helpers (text only) ------------------------------------------------------------------------

  function el(tag, cls, children) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    add(node, children);
    return node;
  }

  function add(node, children) {
    if (children === undefined || children === null) return node;
    if (!Array.isArray(children)) children = [children];
    children.forEach(function (child) {
      if (child === undefined || child === null || child === false) return;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    });
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function isNum(x) {
    return typeof x === "number" && isFinite(x);
  }

  function fixed(x, places) {
    return isNum(x) ? x.toFixed(places) : "\u2014";
  }

  function canon(value) {
    // JSON with sorted keys, so equal change rows compare equal whatever their key order.
    if (Array.isArray(value)) return "[" + value.map(canon).join(",") + "]";
    if (value && typeof value === "object") {
      return "{" + Object.keys(value).sort().map(function (k) {
        return JSON.stringify(k) + ":" + canon(value[k]);
      }).join(",") + "}";
    }
    return JSON.stringify(value === undefined ? null : value);
  }

  function pretty(textValue) {
    // Tool results and arguments are JSON text; indent them when they parse and are not huge.
    if (typeof textValue !== "string") return canon(textValue);
    var t = textValue.trim();
    if (t.length > 4000 || (t.charAt(0) !== "{" && t.charAt(0) !== "[")) return textValue;
    try {
      return JSON.stringify(JSON.parse(t), null, 2);
    } catch (e) {
      return textValue;
    }
  }

  function badge(label, cls) {
    return el("span", "badge" + (cls ? " " + cls : ""), label);
  }

  function cutNote(n) {
    return n ? el("div", "cut", "\u2026 " + n + " more characters not shown") : null;
  }

  function statusOf(row) {
    if (row.infra) return "infra";
    if (row.success === true) return "pass";
    if (row.success === false) return "fail";
    return "unscored";
  }

  function table(headers, body, numeric) {
    var t = el("table", "compact");
    var head = el("tr");
    headers.forEach(function (h, i) { add(head, el("th", numeric && numeric.indexOf(i) >= 0 ? "num" : "", h)); });
    add(t, el("thead", null, head));
    var tb = el("tbody");
    body.forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (c, i) { add(tr, el("td", numeric && numeric.indexOf(i) >= 0 ? "num" : "", c)); });
      add(tb, tr);
    });
    return add(t, tb);
  }

  // -- the list -------------------------------------------------------------------------------------------

  function buildList() {
    (data.tools || []).forEach(function (tool) {
      var opt = document.createElement("option");
      opt.value = tool;
      opt.textContent = tool;
      toolSelect.appendChild(opt);
    });
    if (!rows.length) {
      var empty = el("tr", null, el("td", "note", "No episodes."));
      empty.firstChild.colSpan = 7;
      listBody.appendChild(empty);
      return;
    }
    var fragment = document.createDocumentFragment();
    rows.forEach(function (row, i) {
      var task = tasks[row.task] || {};
      var status = statusOf(row);
      var tr = el("tr", "trial-row " + status, [
        el("td", "mark " + status, MARK[status]),
        el("td", null, [el("span", "task-id", row.task), el("span", "snippet", task.instruction || "")]),
        el("td", "num", String(row.trial)),
        el("td", null, task.kind || "\u2014"),
        el("td", null, task.level || "\u2014"),
        el("td", "num", fixed(row.reward, 2)),
        el("td", null, row.termination || "\u2014"),
      ]);
      tr.tabIndex = 0;
      tr.setAttribute("data-key", row.task + ":" + row.trial);
      tr.setAttribute("data-index", String(i));
      tr.title = task.instruction || row.task;
      tr.addEventListener("click", function () { select(i, false); });
      rowNodes.push(tr);
      fragment.appendChild(tr);
    });
    listBody.appendChild(fragment);
    listBody.addEventListener("keydown", onKey);
  }

  function matches(row) {
    if (failedBox.checked && row.success === true) return false;
    if (toolSelect.value && (row.tools || []).indexOf(toolSelect.value) < 0) return false;
    var q = textBox.value.trim().toLowerCase();
    if (q) {
      var hay = (row.task + " " + ((tasks[row.task] || {}).instruction || "")).toLowerCase();
      if (hay.indexOf(q) < 0) return false;
    }
    return true;
  }

  function applyFilters() {
    var shown = 0;
    rows.forEach(function (row, i) {
      var ok = matches(row);
      rowNodes[i].hidden = !ok;
      if (ok) shown += 1;
    });
    countLabel.textContent = shown + " of " + rows.length + " episodes";
  }

  function onKey(event) {
    var current = event.target.closest ? event.target.closest(".trial-row") : null;
    if (!current) return;
    var i = Number(current.getAttribute("data-index"));
    if (event.key === "Enter" || event.key === " ") {
      select(i, true);
      event.preventDefault();
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      var step = event.key === "ArrowDown" ? 1 : -1;
      for (var j = i + step; j >= 0 && j < rowNodes.length; j += step) {
        if (!rowNodes[j].hidden) { select(j, true); break; }
      }
      event.preventDefault();
    }
  }

  function select(i, focus) {
    if (i < 0 || i >= rows.length) return;
    if (selected >= 0) rowNodes[selected].classList.remove("selected");
    selected = i;
    rowNodes[i].classList.add("selected");
    if (focus) rowNodes[i].focus();
    renderDetail(rows[i]);
    try {
      history.replaceState(null, "", "#episode=" + encodeURIComponent(rows[i].task + ":" + rows[i].trial));
    } catch (e) {
      // Some browsers refuse history changes on pages opened from disk; the deep link is a convenience only.
    }
  }

  function initialIndex() {
    var m = /^#episode=(.+)$/.exec(location.hash || "");
    if (m) {
      var key = decodeURIComponent(m[1]);
      for (var i = 0; i < rows.length; i++) if (rows[i].task + ":" + rows[i].trial === key) return i;
    }
    return 0;
  }

  // -- one episode ----------------------------------------------------------------------------------------

  function header(row, task) {
    var status = statusOf(row);
    var labels = { pass: "passed", fail: "failed", infra: "infra error (not scored)", unscored: "not scored" };
    var badges = el("div", "badges", [
      badge(labels[status], status === "unscored" ? "" : status),
      badge("reward " + fixed(row.reward, 3)),
      task.kind ? badge(task.kind) : null,
      task.level ? badge(task.level) : null,
      badge("ended: " + (row.termination || "\u2014")),
      row.policy ? badge("policy " + row.policy) : null,
      row.user ? badge("user " + row.user) : null,
      badge(row.turns + " turns"),
      isNum(row.wall_s) ? badge(row.wall_s.toFixed(2) + " s") : null,
      row.tokens && (row.tokens.prompt || row.tokens.completion)
        ? badge(row.tokens.prompt + " + " + row.tokens.completion + " tokens") : null,
    ].concat(integrityBadges(row.token_integrity)));
    return [el("h3", "episode-title", "Task " + row.task + " \u00b7 trial " + row.trial), badges];
  }

  // What the token record went through (summary.json's token_integrity, per episode): shown only when not zero.
  var INTEGRITY = [["bridge_breaks", "template bridge breaks", "fail"], ["divergences", "buffer divergences", "fail"],
                   ["turns_without_sampled_ids", "turns without sampled ids", "fail"],
                   ["rescored_logprobs", "logprobs re-scored", ""], ["renamed_call_ids", "tool-call ids renamed", ""]];

  function integrityBadges(counts) {
    if (!counts) return [];
    return INTEGRITY.filter(function (k) { return isNum(counts[k[0]]) && counts[k[0]] > 0; })
      .map(function (k) { return badge(counts[k[0]] + " " + k[1], k[2]); });
  }

  function instruction(task) {
    var out = [el("h3", null, "Instruction"), el("blockquote", "instruction", el("pre", null, task.instruction || ""))];
    var user = task.user || {};
    if (user.name || user.persona) {
      out.push(el("div", "user-line", [el("strong", null, user.name || ""), user.persona ? " \u2014 " + user.persona : ""]));
    }
    var known = user.known || {};
    var keys = Object.keys(known);
    if (keys.length) {
      out.push(table(["known to the user", "value"], keys.map(function (k) {
        return [k, typeof known[k] === "string" ? known[k] : canon(known[k])];
      })));
    }
    if (task.refusal) {
      out.push(el("p", null, [badge("refusal " + (task.refusal.rule || "")), task.refusal.reason || ""]));
    }
    return out;
  }

  function describeChange(item) {
    // Scorer entries look like {table, op, key, changed: {column: [before, after]}}; anything else as JSON.
    if (!item || typeof item !== "object" || !item.changed || typeof item.changed !== "object") return canon(item);
    var cols = Object.keys(item.changed).sort().map(function (col) {
      var pair = item.changed[col];
      return col + ": " + (Array.isArray(pair) ? canon(pair[0]) + " \u2192 " + canon(pair[1]) : canon(pair));
    });
    var rest = {};
    Object.keys(item).forEach(function (k) {
      if (["table", "op", "key", "changed"].indexOf(k) < 0) rest[k] = item[k];
    });
    var extra = Object.keys(rest).length ? "  " + canon(rest) : "";
    return [item.table, item.op, canon(item.key)].join(" ") + "  " + cols.join("; ") + extra;
  }

  function changeList(title, items, omitted) {
    if (!items || !items.length) return null;
    var box = el("div", "score-changes", el("h4", null, title + " (" + (items.length + (omitted || 0)) + ")"));
    items.forEach(function (item) { add(box, el("pre", "change only", describeChange(item))); });
    if (omitted) add(box, el("div", "cut", "\u2026 " + omitted + " more not shown"));
    return box;
  }

  function scoreSection(row) {
    var score = row.score;
    var out = [el("h3", null, "Score")];
    if (!score) return out.concat(el("p", "note", "This episode was not scored."));
    var facts = el("div", "badges");
    if (isNum(score.first_divergent_step)) add(facts, badge("first divergence: step " + score.first_divergent_step, "diverge"));
    if (isNum(score.failure_visible_step)) add(facts, badge("failure visible: step " + score.failure_visible_step, "fail"));
    if (score.end_state) add(facts, badge("end state: " + score.end_state));
    if (score.scorer_version) add(facts, badge("scorer " + score.scorer_version));
    out.push(facts);
    if (score.divergence) out.push(el("p", "divergence", score.divergence));
    var comps = score.components || [];
    if (comps.length) {
      out.push(table(["component", "passed", "weight", "reason"], comps.map(function (c) {
        return [String(c.name), c.passed ? MARK.pass : MARK.fail, fixed(c.weight, 2), c.reason || ""];
      }), [2]));
    }
    var outputs = score.outputs || [];
    if (outputs.length) {
      out.push(table(["expected output", "value", "found"], outputs.map(function (o) {
        return [String(o.label), String(o.value), o.found ? MARK.pass : MARK.fail];
      })));
    }
    out.push(changeList("Missing changes", score.missing_changes, score.missing_changes_omitted));
    out.push(changeList("Wrong values", score.wrong_values, score.wrong_values_omitted));
    out.push(changeList("Extra changes", score.extra_changes, score.extra_changes_omitted));
    return out;
  }

  function conversation(row) {
    var score = row.score || {};
    var diverged = isNum(score.first_divergent_step) ? score.first_divergent_step : null;
    var visible = isNum(score.failure_visible_step) ? score.failure_visible_step : null;
    var byCall = {};
    (row.steps || []).forEach(function (s) { byCall[s.call_id] = s; });
    var box = el("div", "messages");
    (row.messages || []).forEach(function (m) {
      if (m.role === "system") {
        var textValue = isNum(m.system) ? (systems[m.system] || "") : (m.content || "");
        add(box, el("details", "msg msg-system", [
          el("summary", null, "System prompt (" + textValue.length + " characters)"), el("pre", null, textValue)]));
        return;
      }
      var msg = el("div", "msg msg-" + (m.role === "user" || m.role === "assistant" || m.role === "tool" ? m.role : "other"));
      var step = m.role === "tool" ? byCall[m.tool_call_id] : null;
      add(msg, el("span", "role", m.role + (step ? " \u00b7 " + step.name : "")));
      if (step) {
        if (!step.ok) {
          msg.classList.add("msg-error");
          add(msg, badge("error: " + ((step.error && step.error.type) || "failed"), "fail"));
        }
        (step.noise || []).forEach(function (n) { add(msg, badge("noise: " + n, "noise")); });
        if (step.truncated) add(msg, badge("truncated", "noise"));
      }
      if (m.content) add(msg, el("pre", "content", m.role === "tool" ? pretty(m.content) : m.content));
      add(msg, cutNote(m.cut));
      (m.tool_calls || []).forEach(function (call) {
        var s = byCall[call.id];
        var callBox = el("div", "call", [el("span", "name", call.name)]);
        if (s && isNum(s.index)) add(callBox, [" ", badge("step " + s.index)]);
        if (s && s.mutates) add(callBox, badge("write"));
        if (s && s.index === diverged) {
          callBox.classList.add("divergent");
          add(callBox, badge("first divergence", "diverge"));
        }
        if (s && s.index === visible) add(callBox, badge("failure visible", "fail"));
        if (!s) add(callBox, badge("not executed"));
        add(callBox, el("pre", "arguments", pretty(call.arguments)));
        add(callBox, cutNote(call.cut));
        add(msg, callBox);
      });
      add(box, msg);
    });
    var made = (row.steps || []).length;
    if (diverged !== null && diverged >= made) {
      add(box, el("div", "msg divergent", [badge("first divergence", "diverge"),
        "at step " + diverged + ", after the last of the episode's " + made + " tool calls"]));
    }
    if (visible !== null && visible >= made && visible !== diverged) {
      add(box, el("div", "msg", [badge("failure visible", "fail"),
        "at step " + visible + ", after the last of the episode's " + made + " tool calls"]));
    }
    return [el("h3", null, "Conversation"), box];
  }

  function entries(ops) {
    var out = [];
    if (!ops) return out;
    ["inserted", "updated", "deleted"].forEach(function (op) {
      (ops[op] || []).forEach(function (item) {
        var shown;
        if (op === "updated" && item && typeof item === "object" && item.changed) {
          shown = canon(item.key) + "  " + Object.keys(item.changed).sort().map(function (col) {
            var pair = item.changed[col] || [];
            return col + ": " + canon(pair[0]) + " \u2192 " + canon(pair[1]);
          }).join("; ");
        } else {
          shown = canon(item);
        }
        out.push({ op: op, sig: op + canon(item), text: shown });
      });
    });
    return out;
  }

  function diffColumn(title, list, other, omitted) {
    var col = el("div", "diff-col", el("div", "col-title", title));
    if (!list.length) add(col, el("div", "note", "no changes"));
    list.forEach(function (e) {
      var same = other.indexOf(e.sig) >= 0;
      add(col, el("div", "change " + (same ? "same" : "only"), [el("span", "op", OPS[e.op]), e.text]));
    });
    if (omitted) {
      Object.keys(omitted).forEach(function (op) {
        add(col, el("div", "cut", "\u2026 " + omitted[op] + " more " + op + " rows not shown"));
      });
    }
    return col;
  }

  function stateDiff(row, task) {
    var gold = task.expected_changes || {};
    var got = row.changes || {};
    var names = Object.keys(gold).concat(Object.keys(got).filter(function (t) { return !(t in gold); })).sort();
    var out = [el("h3", null, "State: gold vs agent")];
    if (!names.length) return out.concat(el("p", "note", "Neither the gold actions nor the agent changed the state."));
    names.forEach(function (name) {
      var g = entries(gold[name]);
      var a = entries(got[name]);
      var gs = g.map(function (e) { return e.sig; });
      var as = a.map(function (e) { return e.sig; });
      var same = g.length === a.length && g.every(function (e) { return as.indexOf(e.sig) >= 0; });
      var head = el("h4", null, [name, " ", el("span", same ? "identical" : "differs", same ? "identical" : "differs")]);
      out.push(el("div", "diff-table", [head, el("div", "diff-cols", [
        diffColumn("gold (expected)", g, as, (gold[name] || {}).omitted),
        diffColumn("agent (actual)", a, gs, (got[name] || {}).omitted),
      ])]));
    });
    return out;
  }

  function notes(row) {
    var out = [];
    var groups = [["Gold perturbations", row.perturbations], ["Injected noise", row.noise_events],
      ["Infra errors", row.infra_errors]];
    groups.forEach(function (g) {
      if (!g[1] || !g[1].length) return;
      var list = el("ul", "events");
      g[1].forEach(function (e) { add(list, el("li", "mono", canon(e))); });
      out.push(el("h3", null, g[0] + " (" + g[1].length + ")"), list);
    });
    return out;
  }

  function renderDetail(row) {
    var task = tasks[row.task] || {};
    clear(detail);
    add(detail, header(row, task));
    add(detail, instruction(task));
    add(detail, scoreSection(row));
    add(detail, conversation(row));
    add(detail, stateDiff(row, task));
    add(detail, notes(row));
  }

  buildList();
  [failedBox, toolSelect].forEach(function (n) { n.addEventListener("change", applyFilters); });
  textBox.addEventListener("input", applyFilters);
  applyFilters();
  if (rows.length) select(initialIndex(), false);
})();
