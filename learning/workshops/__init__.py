"""Workshop I1, softmax over real tensor views."""
