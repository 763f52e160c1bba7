package kube

import (
	"fmt"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// capGangMin caps a gang minimum at the pods its owner can still run. A
// minimum above that would be waited on forever while the gang's bound
// pods hold their GPUs: an Indexed Job whose other indexes completed, or
// whose parallelism was scaled down, never creates the pods the minimum
// counts. canExist < 0 means the owner does not say (a bare gang, a
// PodGroup). It returns the minimum to use and, when capped, why, in the
// words the pod condition and `corral explain` both show.
func capGangMin(minMembers, canExist int, kind, name string) (int, string) {
	if canExist < 0 || minMembers <= canExist {
		return minMembers, ""
	}
	if canExist < 1 {
		canExist = 1
	}
	return canExist, fmt.Sprintf("gang minimum %d (%s) capped at %d: %s %s can run at most %d pods now (its parallelism, less the completions already succeeded)",
		minMembers, v1alpha1.AnnotationMinMembers, canExist, kind, name, canExist)
}

// gangWaitMessage is the reason a gang with fewer pods than its minimum
// waits. The pod condition and `corral explain` both show it, and explain's
// numbers come from the same minimum (gangMinimum).
func gangWaitMessage(exist, minimum int) string {
	return fmt.Sprintf("gang waits for its pods: %d of %d pods exist", exist, minimum)
}

// gangMinimum is the minimum the gang's state is judged by: the declared
// (possibly capped) one, even while fewer pods exist. workload's GangMin
// clamps it to the pods present, which is right for placing them but made
// `corral explain` print "gang minimum 1" beside a condition saying "1 of
// 6 exist".
func gangMinimum(kj *kjob) int {
	if kj.job.MinMembers > kj.job.Pods() {
		return kj.job.MinMembers
	}
	return kj.job.GangMin()
}
