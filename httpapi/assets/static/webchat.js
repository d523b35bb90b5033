// The dashboard's web chat: posts a message to /webchat/messages and reads
// the answer as the chat API streams it (server-sent events): content
// chunks, tool progress (switchboard_progress) and, in the final chunk, an
// approval question (switchboard_approval), shown with Approve and Deny
// buttons that send "yes" or "no". Everything is put in as text, never as
// markup.
(function () {
  "use strict";
  var form = document.getElementById("webchat-form");
  var log = document.getElementById("webchat-log");
  if (!form || !log) return;
  var box = form.querySelector("textarea");
  var button = form.querySelector("button");
  var busy = false;

  function add(cls, text) {
    var li = document.createElement("li");
    li.className = "msg " + cls;
    if (text) {
      var p = document.createElement("p");
      p.className = "text";
      p.textContent = text;
      li.appendChild(p);
    }
    log.appendChild(li);
    li.scrollIntoView({ block: "end" });
    return li;
  }

  function setBusy(b) {
    busy = b;
    button.disabled = b;
    form.setAttribute("data-busy", b ? "1" : "0");
  }

  // answer is one assistant message being streamed.
  function answer() {
    var li = add("assistant", "");
    var tools = document.createElement("ul");
    tools.className = "tools-live";
    li.appendChild(tools);
    var text = document.createElement("p");
    text.className = "text";
    li.appendChild(text);
    var chunks = 0;
    var calls = {};
    return {
      li: li,
      content: function (t) {
        if (!t) return;
        chunks++;
        text.textContent += t;
        li.setAttribute("data-chunks", String(chunks));
      },
      progress: function (p) {
        var row = calls[p.call_id];
        if (!row) {
          row = document.createElement("li");
          row.className = "tool-live";
          row.setAttribute("data-tool", p.tool);
          tools.appendChild(row);
          calls[p.call_id] = row;
        }
        row.setAttribute("data-state", p.state);
        row.textContent = p.tool + (p.state === "running" ? " …" : p.state === "done" ? " ✓" : " ✗ failed") +
          (p.ms !== undefined ? " " + p.ms + " ms" : "");
      },
      approval: function (q) {
        var div = document.createElement("div");
        div.className = "approval";
        div.setAttribute("data-approval", String(q.id));
        [["Approve", "yes", "approve"], ["Deny", "no", "deny secondary"]].forEach(function (b) {
          var btn = document.createElement("button");
          btn.type = "button";
          btn.className = b[2];
          btn.textContent = b[0];
          btn.addEventListener("click", function () {
            if (busy) return;
            div.querySelectorAll("button").forEach(function (x) { x.disabled = true; });
            div.setAttribute("data-answered", b[1]);
            send(b[1]);
          });
          div.appendChild(btn);
        });
        li.appendChild(div);
      },
      fail: function (msg) {
        li.classList.add("failed");
        var p = document.createElement("p");
        p.className = "error";
        p.textContent = msg;
        li.appendChild(p);
      },
      done: function () { li.setAttribute("data-done", "1"); }
    };
  }

  // read parses the event stream, handing each data object to onData.
  function read(body, onData) {
    var reader = body.getReader();
    var dec = new TextDecoder();
    var buf = "";
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) return;
        buf += dec.decode(r.value, { stream: true });
        var i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          var event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          event.split("\n").forEach(function (line) {
            if (line.indexOf("data: ") !== 0) return;
            var data = line.slice(6);
            if (data === "[DONE]") return;
            try { onData(JSON.parse(data)); } catch (e) { /* not JSON: skip */ }
          });
        }
        return pump();
      });
    }
    return pump();
  }

  function send(text) {
    setBusy(true);
    add("user", text);
    var a = answer();
    fetch(form.getAttribute("data-url"), {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Switchboard-CSRF": form.querySelector("input[name=csrf]").value },
      body: JSON.stringify({ text: text })
    }).then(function (r) {
      var type = r.headers.get("Content-Type") || "";
      if (r.ok && type.indexOf("text/event-stream") === 0) {
        return read(r.body, function (ev) {
          if (ev.error) { a.fail(ev.error.message || "the answer failed"); return; }
          if (ev.switchboard_progress) a.progress(ev.switchboard_progress);
          (ev.choices || []).forEach(function (c) { if (c.delta) a.content(c.delta.content); });
          if (ev.switchboard_approval) a.approval(ev.switchboard_approval);
        });
      }
      if (r.status === 401) { a.fail("You are signed out: reload the page and sign in."); return; }
      return r.text().then(function (t) {
        var msg = t;
        try { msg = JSON.parse(t).error.message; } catch (e) { /* plain text */ }
        a.fail("Not sent (" + r.status + "): " + msg);
      });
    }).catch(function (e) {
      a.fail("The connection failed: " + e);
    }).then(function () {
      a.done();
      setBusy(false);
      box.focus();
    });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = box.value.trim();
    if (!text || busy) return;
    box.value = "";
    send(text);
  });
  box.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.setAttribute("data-ready", "1");
})();
