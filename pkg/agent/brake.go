// SPDX-License-Identifier: Apache-2.0

package agent

// CheckNodeBrake names the /readyz warning shown while the node brake
// cannot be written.
const CheckNodeBrake = "node-brake"
