package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/sandbox"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// gatewayHelperEnv makes the test binary a stand-in gateway
// (runGatewayHelper) instead of running the tests: a process that got its
// secrets in its environment at exec, as a real gateway does (t.Setenv
// does not change /proc/<pid>/environ).
const gatewayHelperEnv = "SKILLS_TEST_GATEWAY"

func TestMain(m *testing.M) {
	if spec := os.Getenv(gatewayHelperEnv); spec != "" {
		os.Exit(runGatewayHelper(spec))
	}
	os.Exit(testkit.RunTests(m))
}

// gatewayHelper is what the stand-in gateway runs: one command tool, one
// call; %d in Args is replaced by the stand-in's pid.
type gatewayHelper struct {
	Workspace string
	Tool      ToolDef
	Args      string
}

// runGatewayHelper hardens itself as serve does, builds the tool, calls it
// once and prints the result or the error.
func runGatewayHelper(spec string) int {
	var h gatewayHelper
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		fmt.Println("bad helper spec:", err)
		return 2
	}
	if err := sandbox.HardenGateway(); err != nil {
		fmt.Println(err)
		return 2
	}
	tool, err := h.Tool.Build("skill:test", Env{Command: CommandPolicy{Enabled: true, Workspace: h.Workspace, Timeout: 10 * time.Second}})
	if err != nil {
		fmt.Println("build:", err)
		return 2
	}
	out, err := tool.Fn(context.Background(), json.RawMessage(fmt.Sprintf(h.Args, os.Getpid())))
	fmt.Printf("result: %s\nerror: %v\n", out, err)
	return 0
}
