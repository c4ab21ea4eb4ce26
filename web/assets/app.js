// cronlock dashboard: the little script it has. No library, no build step.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Live output: a running run's page has #output with data-live, the
  // address of its output stream (text/event-stream: the lines so far,
  // then new ones, then an "end" event); its lines are appended as they
  // come. A reconnect resumes after the last chunk seen (Last-Event-ID).
  var out = document.getElementById("output");
  if (out && out.dataset.live && window.EventSource) {
    var es = new EventSource(out.dataset.live);
    es.onmessage = function (ev) { out.textContent += ev.data + "\n"; out.scrollTop = out.scrollHeight; };
    es.addEventListener("end", function () { es.close(); });
  }
});
