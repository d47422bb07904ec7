package droverv1

import "strings"

// Terminal reports whether a deployment in status s is over: successful,
// failed or cancelled. A terminal deployment never changes again.
func (s DeploymentStatus) Terminal() bool {
	switch s {
	case DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL, DeploymentStatus_DEPLOYMENT_STATUS_FAILED, DeploymentStatus_DEPLOYMENT_STATUS_CANCELLED:
		return true
	}
	return false
}

// Known reports whether s is one of the statuses, not unspecified.
func (s DeploymentStatus) Known() bool {
	_, ok := DeploymentStatus_name[int32(s)]
	return ok && s != DeploymentStatus_DEPLOYMENT_STATUS_UNSPECIFIED
}

// Name is the status in lower case without its prefix ("running").
func (s DeploymentStatus) Name() string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "DEPLOYMENT_STATUS_"))
}
