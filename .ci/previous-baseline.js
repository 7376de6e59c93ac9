// The last good baseline of a series, for the nightlies (nightly-cpu.yml, nightly-ascend.yml, through
// actions/github-script):
//   await require('./.ci/previous-baseline.js')({github, context, core}, NAME, WORKFLOW_REF)
// The newest live artifact NAME among the runs of THIS workflow (WORKFLOW_REF: github.workflow_ref, the caller's file
// where a reusable workflow runs) on this repository's default branch, scheduled or dispatched (a dispatch is how a
// maintainer accepts a baseline), never a pull request's, a fork's, a push's or another branch's run: an artifact's
// name proves nothing of where it came from (any workflow of the repository, a fork's pull_request run included,
// can upload one so named, and it would loosen every later night). Sets the output run-id; none found: the night
// starts the series. A night that regresses carries this baseline forward (uploads it again), so it never expires
// while nights regress. The API failing (a 5xx, a token that may not read the runs) fails the step in one line, never a
// night that starts its series ungated.
const EVENTS = new Set(['schedule', 'workflow_dispatch']);
const MAX_RUNS = 200;

module.exports = async ({github, context, core}, name, workflowRef) => {
  try {
    return await find({github, context, core}, name, workflowRef);
  } catch (err) {
    // the API's failure is one line and a red step: starting the series instead would pass a night ungated (a silent
    // green), and an Octokit error unhandled reads as the night's own failure
    const status = err.status ? `HTTP ${err.status}: ` : '';
    const what = [401, 403].includes(err.status)
      ? "the calling job's token may not read this repository's workflow runs (grant it actions: read, " +
        'docs/verl-nightly-caller-example.yml)'
      : 're-run the workflow';
    core.setFailed(`precision_debugger nightly: the last good baseline ${name} could not be looked up ` +
                   `(${status}${String(err.message).split('\n')[0]}): not a verdict on verl; ${what}`);
    return '';
  }
};

async function find({github, context, core}, name, workflowRef) {
  const {owner, repo} = context.repo;
  const file = workflowRef.split('@')[0].split('/').slice(2).join('/');  // OWNER/REPO/.github/workflows/FILE@REF
  const branch = (await github.rest.repos.get({owner, repo})).data.default_branch;
  let seen = 0;
  for await (const page of github.paginate.iterator(github.rest.actions.listWorkflowRuns, {
    owner, repo, workflow_id: file.split('/').pop(), branch, status: 'completed', per_page: 50,
  })) {
    for (const run of page.data) {
      if (++seen > MAX_RUNS) break;
      const own = (run.path || '').split('@')[0] === file && run.head_branch === branch && EVENTS.has(run.event) &&
        run.head_repository && run.head_repository.full_name === `${owner}/${repo}` && run.id !== context.runId;
      if (!own) continue;
      const arts = await github.rest.actions.listWorkflowRunArtifacts({owner, repo, run_id: run.id, name});
      if (arts.data.artifacts.some((a) => a.name === name && !a.expired)) {
        core.setOutput('run-id', String(run.id));
        core.info(`previous baseline ${name}: run ${run.id} (${run.event} on ${branch}, ${run.created_at})`);
        return String(run.id);
      }
    }
    if (seen > MAX_RUNS) break;
  }
  core.warning(`no previous ${name} among this workflow's scheduled or dispatched runs on ${branch}: this night ` +
               'starts the series');
  return '';
}
