// The splash shown while the sidecar loads the model. The launcher (coli web
// or the Tauri shell) drives it with colibriSplash.status(line) for every line
// the server prints and colibriSplash.fail(message, details) when it stops;
// lines with "NN%" move the bar, anything else keeps it sweeping.
(function () {
  var started = Date.now();
  var el = function (id) { return document.getElementById(id); };
  var timer = setInterval(function () {
    var s = Math.round((Date.now() - started) / 1000);
    el("elapsed").textContent = s >= 2 ? s + " s" : "";
  }, 500);
  window.colibriSplash = {
    status: function (line) {
      el("status").textContent = line;
      var m = /(\d{1,3})%/.exec(line);
      var bar = el("bar");
      if (m) {
        bar.classList.add("known");
        el("fill").style.width = Math.min(100, Number(m[1])) + "%";
        bar.setAttribute("aria-valuenow", m[1]);
      } else {
        bar.classList.remove("known");
        el("fill").style.width = "";
        bar.removeAttribute("aria-valuenow");
      }
    },
    fail: function (message, details) {
      clearInterval(timer);
      document.body.classList.add("failed");
      el("status").textContent = message;
      if (details) {
        el("details").textContent = details;
        el("details").hidden = false;
      }
    },
  };
})();
