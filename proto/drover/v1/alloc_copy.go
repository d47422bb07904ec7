package droverv1

// ShallowCopy returns a copy of the allocation that shares its messages and
// lists with m. The state store's objects are immutable, and a writer that
// changes only scalar fields (an agent's report: the client status and
// description, the indexes and times) need not deep-copy what it leaves
// as it is: CloneVT copies the resources, states and trackers of every
// reported allocation only to drop them again. A writer that changes a
// shared message or list must replace it, never modify it in place.
// TestAllocationShallowCopyKeepsEveryField fails when a field is added to
// Allocation and not here.
func (m *Allocation) ShallowCopy() *Allocation {
	if m == nil {
		return nil
	}
	return &Allocation{
		Id:                 m.Id,
		EvalId:             m.EvalId,
		Name:               m.Name,
		NodeId:             m.NodeId,
		JobId:              m.JobId,
		JobVersion:         m.JobVersion,
		TaskGroup:          m.TaskGroup,
		Resources:          m.Resources,
		DesiredStatus:      m.DesiredStatus,
		DesiredDescription: m.DesiredDescription,
		DesiredTransition:  m.DesiredTransition,
		ClientStatus:       m.ClientStatus,
		ClientDescription:  m.ClientDescription,
		AllocStates:        m.AllocStates,
		PreviousAllocation: m.PreviousAllocation,
		NextAllocation:     m.NextAllocation,
		FollowupEvalId:     m.FollowupEvalId,
		RescheduleTracker:  m.RescheduleTracker,
		Score:              m.Score,
		CreateIndex:        m.CreateIndex,
		ModifyIndex:        m.ModifyIndex,
		AllocModifyIndex:   m.AllocModifyIndex,
		CreateTime:         m.CreateTime,
		ModifyTime:         m.ModifyTime,
		DeploymentId:       m.DeploymentId,
		DeploymentStatus:   m.DeploymentStatus,
		unknownFields:      m.unknownFields,
	}
}
