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
    // A refusal (429: the daemon serves its most followers) or another
    // failed answer closes the stream for good; a lost connection retries.
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) {
        out.textContent += "[live output unavailable here: the daemon serves its most followers, or the stream failed; reload the page later]\n";
      }
    };
  }
});
