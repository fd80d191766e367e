"""`sciga fetch`: the polite HTTP client, the fetch cache, fetching one paper's parts, the
fetch job and its cost estimate."""
