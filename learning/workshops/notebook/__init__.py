"""What the notebook's cells use: the kernel wrappers' contracts and the interpreter they run
on without a GPU, the pictures of views, the generated-code evidence, the portfolio kernel,
and the assertions of the visible test cells."""
