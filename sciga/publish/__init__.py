"""Publishing a build that passed the quality gate to the Hugging Face Hub: one atomic commit
plus a version tag, resumable, with a dry run."""
