// A stand-in for actions/github-script: the script input run as an async function of {github, context, core,
// require}, as the action runs it, with `github` an Octokit of the REST methods the workflows call (and nothing else:
// a call to another is a TypeError, and the test fails), each a real request to GITHUB_API_URL (the test's fake API,
// tests/fake_github.py) with the input token; `paginate.iterator` yields pages of the list itself, as Octokit does.
// `require` resolves from the workspace, as the action's does.
const fs = require('fs');
const path = require('path');
const {createRequire} = require('module');

const api = process.env.GITHUB_API_URL.replace(/\/$/, '');
const token = process.env.INPUT_GITHUB_TOKEN;

async function call(route, params) {
  const [method, template] = route.split(' ');
  const query = {...params};
  const url = template.replace(/\{(\w+)\}/g, (_, k) => { const v = query[k]; delete query[k]; return encodeURIComponent(v); });
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)])).toString();
  const res = await fetch(`${api}${url}${qs ? `?${qs}` : ''}`, {method, headers: {authorization: `token ${token}`}});
  const data = await res.json();
  if (!res.ok) {
    const err = new Error(`${data.message} - https://docs.github.com/rest`);
    err.status = res.status;
    throw err;
  }
  return {status: res.status, data};
}

const endpoint = (route, list) => Object.assign((params) => call(route, params), {list});
const github = {
  rest: {
    repos: {get: endpoint('GET /repos/{owner}/{repo}')},
    actions: {
      listWorkflowRuns: endpoint('GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs', 'workflow_runs'),
      listWorkflowRunArtifacts: endpoint('GET /repos/{owner}/{repo}/actions/runs/{run_id}/artifacts', 'artifacts'),
    },
  },
  paginate: {
    iterator: async function* (fn, params) {
      for (let page = 1; ; page++) {
        const res = await fn({...params, page});
        const items = fn.list ? res.data[fn.list] : res.data;
        yield {...res, data: items};
        if (items.length < (params.per_page || 30)) return;
      }
    },
  },
};
const [owner, repo] = process.env.GITHUB_REPOSITORY.split('/');
const context = {repo: {owner, repo}, runId: Number(process.env.GITHUB_RUN_ID), eventName: process.env.GITHUB_EVENT_NAME};
const out = (line) => fs.appendFileSync(process.env.GITHUB_OUTPUT, `${line}\n`);
const core = {
  setOutput: (k, v) => out(`${k}=${v}`),
  info: (m) => console.log(m),
  warning: (m) => console.log(`::warning::${m}`),
  error: (m) => console.log(`::error::${m}`),
  setFailed: (m) => { console.log(`::error::${m}`); process.exitCode = 1; },
};
const workspaceRequire = createRequire(path.join(process.env.GITHUB_WORKSPACE, 'index.js'));
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
new AsyncFunction('github', 'context', 'core', 'require', process.env.INPUT_SCRIPT)(github, context, core, workspaceRequire)
  .then((result) => { if (result !== undefined) out(`result=${typeof result === 'string' ? result : JSON.stringify(result)}`); })
  .catch((err) => { console.log(`::error::Unhandled error: ${err.message}`); process.exitCode = 1; });
