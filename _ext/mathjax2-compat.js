// The ipywidgets renderer typesets widget labels with MathJax 2's `MathJax.Hub.Queue`, but this
// book loads MathJax 3, which has no `Hub`. Give every object that becomes `window.MathJax` a
// `Hub.Queue` that typesets the element with MathJax 3 once MathJax has started.
(() => {
  const Hub = {
    Queue: (job) => {
      const element = job[2];
      const mathjax = window.MathJax;
      if (mathjax && mathjax.startup && mathjax.startup.promise) {
        mathjax.startup.promise.then(() => mathjax.typesetPromise([element]));
      }
    },
  };
  let current = window.MathJax;
  const withHub = (value) => {
    if (value && typeof value === "object" && !value.Hub) value.Hub = Hub;
    return value;
  };
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: () => current,
    set: (value) => {
      current = withHub(value);
    },
  });
  withHub(current);
})();
