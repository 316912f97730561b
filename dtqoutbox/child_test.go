package dtqoutbox

func childMain() int { return 0 }

const childEnv = "DTQ_OUTBOX_TEST_CHILD"
